"""The writes a runner lifecycle makes, against the emulator (ADR 0032, 0033): the runner's
registration and its pod's phase go into one ER status write; a pod that does not start gets
its runner a Pending status (with the registration) after ``pending_status_delay``; a finished
runner leaves no object behind (its Pod and JIT Secret go by garbage collection); counts-only
set status writes are coalesced, and the drain gate counts runners from the cache."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import Stack, ars_manifest, build_stack, reconciler_test_settings

pytestmark = pytest.mark.integration

RUNNING = {
    "phase": "Running",
    "containerStatuses": [{"name": "runner", "state": {"running": {}}}],
    "conditions": [{"type": "Ready", "status": "True"}],
}
DONE = {
    "phase": "Succeeded",
    "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
}


@pytest.fixture
async def production_stack(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> AsyncIterator[Stack]:
    """The production status timings (pending delay 5 s, counts every 5 s)."""
    settings = reconciler_test_settings(
        pending_status_delay_seconds=5.0, status_interval_seconds=5.0
    )
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as built:
        yield built


async def _set_with_runner(stack: Stack) -> str:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers)
    await stack.scale("solo", 1, 1)

    async def pod() -> str | None:
        pods = await stack.list("Pod")
        return str(pods[0]["metadata"]["name"]) if len(pods) == 1 else None

    name: str = await eventually(pod)
    return name


def _status_patches(emulator: KubeEmulator, name: str) -> int:
    return sum(
        1
        for r in emulator.requests
        if r.method == "PATCH" and r.path.endswith(f"/ephemeralrunners/{name}/status")
    )


async def _er_status(stack: Stack, name: str) -> dict[str, Any]:
    er = await stack.kube.get("EphemeralRunner", name, stack.namespace)
    status: dict[str, Any] = er.get("status") or {}
    return status


async def test_registration_and_running_phase_in_one_write_then_nothing_left(
    production_stack: Stack, kube_emulator: KubeEmulator
) -> None:
    stack = production_stack
    name = await _set_with_runner(stack)
    secret = await stack.kube.get("Secret", name, stack.namespace)
    runner_id = int(base64.b64decode(secret["data"]["runnerId"]))
    assert (await _er_status(stack, name)).get("runnerId") is None  # not written on its own

    await stack.set_pod_status(name, RUNNING)

    async def running() -> dict[str, Any] | None:
        status = await _er_status(stack, name)
        return status if status.get("phase") == "Running" else None

    status = await eventually(running)
    assert status["runnerId"] == runner_id
    assert status["runnerName"] == name
    assert status["ready"] is True
    await stack.wait_idle()
    assert _status_patches(kube_emulator, name) == 1

    # The set's counts follow (the first counts write goes out at once).
    async def counted() -> bool:
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        return (ers.get("status") or {}).get("runningEphemeralRunners") == 1

    await eventually(counted)

    # Finished (exit 0): GitHub removed the ephemeral runner with its job, so no removal call
    # (as upstream 0.15); the ER goes with both finalizers, and its Pod and JIT Secret are
    # garbage collected (no delete of ours).
    await stack.set_pod_status(name, DONE)

    async def gone() -> bool:
        names = {
            obj["metadata"]["name"]
            for kind in ("EphemeralRunner", "Pod", "Secret")
            for obj in await stack.list(kind)
        }
        return name not in names

    await eventually(gone)
    assert runner_id not in stack.rpc.removed

    # The counts-only change that follows is held at most ``status_interval``, not dropped.
    async def idle() -> bool:
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        status = ers.get("status") or {}
        return status.get("runningEphemeralRunners") == 0 and status.get("currentReplicas") == 0

    await eventually(idle, within=20)
    deletes = [
        r.path
        for r in kube_emulator.requests
        if r.method == "DELETE" and r.path.rsplit("/", 1)[-1] == name
    ]
    assert deletes == [
        f"/apis/actions.github.com/v1alpha1/namespaces/{stack.namespace}/ephemeralrunners/{name}"
    ]


async def test_a_pod_that_does_not_start_gets_its_registration_after_the_delay(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> None:
    settings = reconciler_test_settings(pending_status_delay_seconds=0.5)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as stack:
        name = await _set_with_runner(stack)  # nobody plays the kubelet: no pod status

        async def pending() -> dict[str, Any] | None:
            status = await _er_status(stack, name)
            return status if status.get("runnerId") else None

        status = await eventually(pending)
        assert status["phase"] == "Pending"
        assert status["runnerName"] == name


async def test_two_replicas_scale_up_under_one_lease_without_a_claim_each_time(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> None:
    """ADR 0033: the replica holding a set's creation lease creates from its block of names;
    the other creates nothing for the set meanwhile; every runner exists once."""
    settings = reconciler_test_settings(resync_interval_seconds=0.2)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, replicas=2, settings=settings
    ) as stack:
        await stack.register("solo", "", 7)
        await stack.apply_ars(ars_manifest(stack.namespace, "solo"))

        async def has_ers() -> bool:
            return bool(await stack.list("EphemeralRunnerSet"))

        await eventually(has_ers)
        for replicas in (1, 2, 3, 4):
            await stack.scale("solo", replicas, replicas)

            async def runners(n: int = replicas) -> bool:
                return len(await stack.list("EphemeralRunner")) == n

            await eventually(runners)
        await stack.wait_idle()
        names = [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")]
        assert len(names) == 4
        asked = [r["runner_name"] for r in stack.rpc.jit_requests]
        assert sorted(asked) == sorted(names)  # one JIT request per runner, none twice
        claims = [
            e
            for e in await stack.audit_events()
            if e.kind == "EphemeralRunnerSet" and e.why.startswith("claim ")
        ]
        assert 1 <= len(claims) < 4  # scale-ups inside the lease need no claim
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        claim = json.loads(ers["metadata"]["annotations"]["arcflow.io/runner-claim"])
        assert claim["by"] in {app.context.instance for app in stack.apps}
        assert claim["until"] > claim["at"]
        assert claim["next"] >= 4
