"""ARS changes: the drain gate, listener-only recreation, runnerGroup change without an
orphan, listener pod restarts, the version gate, outdated runners, one invalid ARS among
valid ones."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.reconciler.controllers.ars_rules import ANNOTATION_OUTDATED_RECREATIONS
from tests.polling import eventually

from .harness import (
    SECRET_NAME,
    Stack,
    ars_manifest,
    build_stack,
    reconciler_test_settings,
    runner_template,
)

pytestmark = pytest.mark.integration


async def _running(stack: Stack, name: str) -> None:
    async def check() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", name, stack.namespace)
        listeners = [
            a
            for a in await stack.list("AutoscalingListener", stack.controller_namespace)
            if a["spec"]["autoscalingRunnerSetName"] == name
        ]
        return (ars.get("status") or {}).get("phase") == "Running" and len(listeners) == 1

    await eventually(check)


async def _solo(stack: Stack, **spec: Any) -> None:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", **spec))
    await _running(stack, "solo")


async def _listeners(stack: Stack) -> list[dict[str, Any]]:
    return await stack.list("AutoscalingListener", stack.controller_namespace)


def _image(ers: dict[str, Any]) -> str:
    return str(ers["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"])


async def _one_runner(stack: Stack, ers: str = "solo") -> str:
    await stack.scale(ers, 1, 1)

    async def registered() -> str | None:
        runners = await stack.list("EphemeralRunner")
        if len(runners) == 1 and (runners[0].get("status") or {}).get("runnerId"):
            return str(runners[0]["metadata"]["name"])
        return None

    name: str = await eventually(registered)
    return name


async def _watch_max(check: Callable[[], Awaitable[int]], stop: asyncio.Event) -> int:
    """The largest value ``check`` returned while polling until ``stop``."""
    most = 0
    while not stop.is_set():
        most = max(most, await check())
        await asyncio.sleep(0.01)
    return most


async def test_a_template_change_drains_then_patches(stack: Stack) -> None:
    await _solo(stack)
    runner = await _one_runner(stack)
    await stack.set_runner_status(runner, {"phase": "Running", "jobId": "job-1"})

    async def counted_running() -> bool:
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        return (ers.get("status") or {}).get("runningEphemeralRunners") == 1

    await eventually(counted_running)

    new = runner_template("ghcr.io/actions/actions-runner:2.330.0")
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", template=new))

    async def listener_gone() -> bool:
        return not await _listeners(stack)

    await eventually(listener_gone)
    await asyncio.sleep(0.5)
    ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
    assert _image(ers) == "ghcr.io/actions/actions-runner:latest"  # the patch waits
    assert not await _listeners(stack)  # no new jobs while draining
    assert [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")] == [runner]

    await stack.set_pod_status(
        runner,
        {  # the job finished: runner exits 0
            "phase": "Succeeded",
            "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
        },
    )

    async def patched_and_listening() -> bool:
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        return _image(ers) == "ghcr.io/actions/actions-runner:2.330.0" and bool(
            await _listeners(stack)
        )

    await eventually(patched_and_listening)


async def test_a_max_runners_change_recreates_only_the_listener(stack: Stack) -> None:
    await _solo(stack, maxRunners=3)
    await stack.wait_idle()
    ers_before = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
    al_before = (await _listeners(stack))[0]

    await stack.apply_ars(ars_manifest(stack.namespace, "solo", maxRunners=9))

    async def replaced() -> dict[str, Any] | None:
        listeners = await _listeners(stack)
        if len(listeners) == 1 and listeners[0]["metadata"]["uid"] != al_before["metadata"]["uid"]:
            return listeners[0]
        return None

    al_after = await eventually(replaced)
    assert al_after["spec"]["maxRunners"] == 9
    assert al_after["metadata"]["name"] == al_before["metadata"]["name"]
    await stack.wait_idle()
    ers_after = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
    assert ers_after["metadata"]["uid"] == ers_before["metadata"]["uid"]
    assert ers_after["metadata"]["generation"] == ers_before["metadata"]["generation"]
    assert ers_after["spec"] == ers_before["spec"]


async def test_a_runner_group_change_replaces_the_listener_never_two(stack: Stack) -> None:
    await _solo(stack)
    old = (await _listeners(stack))[0]["metadata"]["name"]
    stop = asyncio.Event()

    async def count() -> int:
        return len(await _listeners(stack))

    watcher = asyncio.create_task(_watch_max(count, stop))
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", runnerGroup="gpu-pool"))

    async def new_one() -> bool:
        names = [a["metadata"]["name"] for a in await _listeners(stack)]
        return len(names) == 1 and names[0] != old

    await eventually(new_one)
    stop.set()
    assert await watcher == 1  # the old AL was gone before the new one was created
    assert {a["metadata"]["name"] for a in await _listeners(stack)} != {old}


async def test_listener_pod_is_recreated_when_terminated_evicted_or_its_inputs_change(
    stack: Stack,
) -> None:
    await _solo(stack)
    name = (await _listeners(stack))[0]["metadata"]["name"]

    async def pod_uid() -> str | None:
        pods = [
            p
            for p in await stack.list("Pod", stack.controller_namespace)
            if not p["metadata"].get("deletionTimestamp")
        ]
        return pods[0]["metadata"]["uid"] if pods else None

    async def new_pod(old: str) -> bool:
        uid = await pod_uid()
        return uid is not None and uid != old

    first = await eventually(pod_uid)
    terminated = {
        "phase": "Failed",
        "containerStatuses": [{"name": "listener", "state": {"terminated": {"exitCode": 1}}}],
    }
    await stack.set_pod_status(name, terminated, stack.controller_namespace)
    await eventually(lambda: new_pod(first))

    second = await pod_uid()
    assert second is not None
    await stack.set_pod_status(
        name, {"phase": "Failed", "reason": "Evicted"}, stack.controller_namespace
    )
    await eventually(lambda: new_pod(second))

    third = await pod_uid()
    assert third is not None
    await stack.kube.patch_merge(  # new credentials: config.json refreshed, pod recreated
        "Secret",
        SECRET_NAME,
        {"data": {"github_token": base64.b64encode(b"ghp_rotated").decode()}},
        namespace=stack.namespace,
    )
    # The user's credentials Secret is not watched (only arcflow's own Secrets are): the
    # periodic resync is what notices the rotation.
    await stack.app.resync()
    await eventually(lambda: new_pod(third))
    config = await stack.kube.get("Secret", f"{name}-config", stack.controller_namespace)
    assert json.loads(base64.b64decode(config["data"]["config.json"]))["github_token"] == (
        "ghp_rotated"
    )


async def test_two_sets_one_invalid_the_other_keeps_reconciling(
    kube_emulator: KubeEmulator, stack: Stack
) -> None:
    """On the emulator: a real server's CRD schema refuses this object before any controller
    sees it (tests/conformance/test_crd_validation.py shows that); the emulator stores it, as a
    server keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    await stack.register("bad", "", 21)
    await stack.apply_ars(
        ars_manifest(stack.namespace, "bad", runnerVariants=[{"name": "Not_A_DNS_Label"}])
    )
    await _solo(stack)
    events = await stack.events("InvalidSpec", "bad")
    assert len(events) == 1
    assert {e["metadata"]["name"] for e in await stack.list("EphemeralRunnerSet")} == {"solo"}
    runner = await _one_runner(stack)  # the valid set keeps working after the invalid one
    assert runner.startswith("solo-runner-")


async def test_version_gate_deletes_a_set_of_another_chart_version(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> None:
    settings = reconciler_test_settings(build_version="0.14.2")
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as stack:
        await stack.register("old", "", 31)
        await stack.register("same", "", 32)
        old = ars_manifest(stack.namespace, "old")
        old["metadata"]["labels"] = {"app.kubernetes.io/version": "0.13.1"}
        same = ars_manifest(stack.namespace, "same")
        same["metadata"]["labels"] = {"app.kubernetes.io/version": "0.14.0"}
        await stack.apply_ars(same)
        await stack.apply_ars(old)

        async def old_gone() -> bool:
            return "old" not in {
                a["metadata"]["name"] for a in await stack.list("AutoscalingRunnerSet")
            }

        await eventually(old_gone)
        await _running(stack, "same")
        events = await stack.events("VersionNotAllowed", "old")
        assert len(events) == 1
        assert events[0]["type"] == "Warning"
        assert "0.13.1" in events[0]["message"]
        assert "0.14.2" in events[0]["message"]
        audit = await stack.audit_events()
        deleted = [e for e in audit if e.kind == "AutoscalingRunnerSet" and e.action == "deleted"]
        assert [e.name for e in deleted] == ["old"]
        assert "not allowed" in deleted[0].why
        assert any(e.kind == "Event" and e.action == "created" and e.ars == "old" for e in audit)


async def test_outdated_runners_recreate_listener_and_set_with_a_loop_guard(
    stack: Stack,
) -> None:
    await _solo(stack)

    async def outdate_one_runner() -> None:
        async def outdated() -> bool:
            runner = await _one_runner(stack)
            try:  # the runner's pod may not exist yet (or be replaced) between list and write
                await stack.set_pod_status(
                    runner,
                    {
                        "phase": "Failed",
                        "containerStatuses": [
                            {"name": "runner", "state": {"terminated": {"exitCode": 7}}}
                        ],
                    },
                )
            except NotFoundError:
                return False
            return True

        await eventually(outdated)

    async def ers_uid() -> str | None:
        sets = [
            e
            for e in await stack.list("EphemeralRunnerSet")
            if not e["metadata"].get("deletionTimestamp")
        ]
        return sets[0]["metadata"]["uid"] if sets else None

    first_ers = await ers_uid()
    first_al = (await _listeners(stack))[0]["metadata"]["uid"]
    await outdate_one_runner()

    async def recreated(old: str | None) -> str | None:
        uid = await ers_uid()
        listeners = await _listeners(stack)
        return uid if uid not in (None, old) and len(listeners) == 1 else None

    second_ers = await eventually(lambda: recreated(first_ers))
    assert (await _listeners(stack))[0]["metadata"]["uid"] != first_al
    assert len(await stack.events("RunnerImageOutdated", "solo")) == 1
    await _running(stack, "solo")

    # outdated again at once: the loop guard (base 2 s in the harness) lets the second
    # recreation happen no sooner than 2 s after it counted the first. Read from the guard's
    # own record on the ARS, so a loaded machine that takes longer than 2 s to get here only
    # makes the wait shorter, never the test wrong.
    async def guard_record() -> dict[str, float]:
        ars = await stack.kube.get("AutoscalingRunnerSet", "solo", stack.namespace)
        raw = (ars["metadata"].get("annotations") or {}).get(ANNOTATION_OUTDATED_RECREATIONS)
        return dict(json.loads(raw)["_"]) if raw else {}

    first = await guard_record()
    assert first.get("count") == 1, first
    await outdate_one_runner()
    await eventually(lambda: recreated(second_ers), within=30)
    second = await guard_record()
    assert second.get("count") == 2, second
    assert second["last"] - first["last"] >= 2.0, (first, second)
    assert len(await stack.events("RunnerImageOutdated", "solo")) == 2
