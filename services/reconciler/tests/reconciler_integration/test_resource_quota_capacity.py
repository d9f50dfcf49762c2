"""``capacity.fromResourceQuota`` on the real control plane (ADR 0062): the set's budget
follows the ResourceQuota of its namespace, read from the reconciler's watch-fed cache; a set
without the flag is not touched by a quota."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from arcflow.common.constants import ANNOTATION_LISTENER_CAPACITY
from arcflow.common.kube import RESOURCE_QUOTA
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration


def _quota(namespace: str, hard: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "runners", "namespace": namespace},
        "spec": {"hard": hard},
    }


async def _capacity(stack: Stack, ars: str) -> dict[str, Any] | None:
    """The capacity annotation of the set's listener, ``None`` without listener or annotation."""
    for al in await stack.list("AutoscalingListener", stack.controller_namespace):
        if al["spec"]["autoscalingRunnerSetName"] == ars:
            raw = (al["metadata"].get("annotations") or {}).get(ANNOTATION_LISTENER_CAPACITY)
            return None if raw is None else dict(json.loads(raw))
    return None


async def _configs(stack: Stack) -> list[dict[str, Any]]:
    """The ``capacity`` key of every listener ``config.json`` in the controller namespace."""
    found = []
    for secret in await stack.list("Secret", stack.controller_namespace):
        raw = (secret.get("data") or {}).get("config.json")
        if raw:
            found.append(json.loads(base64.b64decode(raw)).get("capacity") or {})
    return found


async def _budget_is(stack: Stack, ars: str, cpu: str, max_runners: int) -> None:
    def wanted(capacity: dict[str, Any] | None) -> bool:
        return (
            capacity is not None
            and capacity.get("resources") == {"cpu": cpu}
            and capacity.get("maxRunners") == max_runners
        )

    async def check() -> bool:  # the annotation and the listener's config.json
        return wanted(await _capacity(stack, ars)) and any(map(wanted, await _configs(stack)))

    await eventually(check, within=30, what=f"listener capacity of {ars}: cpu {cpu}, {max_runners}")


async def test_the_budget_follows_the_namespace_quota(stack: Stack) -> None:
    ns = stack.namespace
    await stack.kube.create(_quota(ns, {"requests.cpu": "4", "pods": "3"}))
    await stack.register("quota", "", 31)
    await stack.register("plain", "", 32)
    await stack.apply_ars(ars_manifest(ns, "quota", capacity={"fromResourceQuota": True}))
    await stack.apply_ars(ars_manifest(ns, "plain", capacity={"maxRunners": 5}))

    await _budget_is(stack, "quota", "4", 3)

    async def plain_listener() -> dict[str, Any] | None:
        return await _capacity(stack, "plain")

    plain = await eventually(plain_listener, what="listener of the set without the flag")
    assert plain.get("maxRunners") == 5
    assert "resources" not in plain

    # The quota changes: only the watch tells the reconciler (no ARS change is published).
    await stack.kube.patch_merge(
        RESOURCE_QUOTA,
        "runners",
        {"spec": {"hard": {"requests.cpu": "6", "pods": "2"}}},
        namespace=ns,
    )
    await _budget_is(stack, "quota", "6", 2)
    assert await _capacity(stack, "plain") == plain  # without the flag nothing changes
