"""Standby listener (ADR 0025): ``listener-replicas: "2"`` on an ARS gives two listener pods;
taking it away gives one again (the listener is recreated, the standby pod removed)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

REPLICAS = "actions.github.com/listener-replicas"


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


async def _listener_pods(stack: Stack) -> dict[str, dict[str, Any]]:
    pods = await stack.list("Pod", stack.controller_namespace)
    return {
        p["metadata"]["name"]: p
        for p in pods
        if p["metadata"]["name"].startswith("duo-") and not p["metadata"].get("deletionTimestamp")
    }


async def test_two_listener_pods_then_one(stack: Stack) -> None:
    await stack.register("duo", "", 7)
    manifest = ars_manifest(stack.namespace, "duo")
    manifest["metadata"]["annotations"] = {REPLICAS: "2"}
    await stack.apply_ars(manifest)

    async def two() -> dict[str, dict[str, Any]] | None:
        pods = await _listener_pods(stack)
        return pods if len(pods) == 2 else None

    pods = await eventually(two, within=20)
    (listener,) = await stack.list("AutoscalingListener", stack.controller_namespace)
    name = listener["metadata"]["name"]
    assert listener["metadata"]["annotations"][REPLICAS] == "2"
    assert set(pods) == {name, f"{name}-1"}
    assert _env(pods[name])["ARCFLOW_LISTENER_REPLICA"] == "0"
    assert _env(pods[f"{name}-1"])["ARCFLOW_LISTENER_REPLICA"] == "1"
    assert {_env(p)["ARCFLOW_LISTENER_REPLICAS"] for p in pods.values()} == {"2"}

    live = await stack.kube.get("AutoscalingRunnerSet", "duo", stack.namespace)
    await stack.kube.patch_merge(
        "AutoscalingRunnerSet",
        "duo",
        {
            "metadata": {
                "annotations": {REPLICAS: None},
                "resourceVersion": live["metadata"]["resourceVersion"],
            }
        },
        namespace=stack.namespace,
    )

    async def one() -> dict[str, dict[str, Any]] | None:
        pods = await _listener_pods(stack)
        listeners = await stack.list("AutoscalingListener", stack.controller_namespace)
        if (
            len(pods) == 1
            and len(listeners) == 1
            and not listeners[0]["metadata"].get("annotations", {}).get(REPLICAS)
        ):
            return pods
        return None

    (pod,) = (await eventually(one, within=30)).values()
    assert pod["metadata"]["name"] == name
    assert "ARCFLOW_LISTENER_REPLICA" not in _env(pod)


async def test_a_bad_replica_count_is_reported_not_applied(stack: Stack) -> None:
    await stack.register("bad", "", 8)
    manifest = ars_manifest(stack.namespace, "bad")
    manifest["metadata"]["annotations"] = {REPLICAS: "5"}
    await stack.apply_ars(manifest)

    async def condition() -> str | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "bad", stack.namespace)
        for cond in (ars.get("status") or {}).get("conditions") or []:
            if REPLICAS in str(cond.get("message", "")):
                return str(cond["message"])
        return None

    message = await eventually(condition, within=20)
    assert "must be 1 or 2" in message
    assert await stack.list("AutoscalingListener", stack.controller_namespace) == []
