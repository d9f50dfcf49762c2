"""Runner pods refused by the API server (§3.6 step 8), over HTTP with the emulator's scripted
admission refusals: a ResourceQuota refusal is retried, and after 10 minutes (of ER age) the
runner is replaced; PodSecurity (plain Forbidden) and 422 Invalid mark the runner
``Failed/InvalidPod`` (Invalid also removes it from the service). On the real server, a pod
refused because its service account does not exist yet is retried until it does.

The registrar is the harness's responder (the refusals are the API server's, the registrar
only answers), so a removal is checked on its call log, the reconciler's boundary; removal on
the Actions simulator is ``test_end_to_end.py``'s and ``test_slots.py``'s. "Not removed" is
checked once the pass that refused the pod was seen to end (``Stack.handled``, ADR 0083)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.cli.doctor import read_cluster
from arcflow.cli.doctor_rules import diagnose
from arcflow.common.events import RunnerLifecycle
from arcflow.common.kube import KubeClient
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.kube_emulator.faults import InjectedError
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import (
    TOKEN,
    Stack,
    ars_manifest,
    build_stack,
    metric_total,
    reconciler_test_settings,
)

pytestmark = pytest.mark.integration

QUOTA = 'pods "{name}" is forbidden: exceeded quota: compute-resources, requested: cpu=8'
QUOTA_PREFIX = "forbidden: exceeded quota: compute-resources, requested: cpu=8"
POD_SECURITY = (
    'pods "runner" is forbidden: violates PodSecurity "restricted:latest": '
    "allowPrivilegeEscalation != false"
)
INVALID = 'Pod "runner" is invalid: spec.containers[0].resources.requests: Invalid value: "8"'


@pytest.fixture
async def resyncing_stack(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> AsyncIterator[Stack]:
    """A stack whose periodic full resync runs every 0.3 s: it stands in for the 30 s quota
    requeue, which is a constant (the resync re-runs the same reconcile pass)."""
    settings = reconciler_test_settings(resync_interval_seconds=0.3)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as built:
        yield built


def _refuse_pods(
    emulator: KubeEmulator, stack: Stack, status: int, reason: str, message: str, **match: Any
) -> InjectedError:
    """Refuse pod creation in the stack's namespace, as quota or admission would."""
    return emulator.inject_error(
        verb="create",
        resource="pods",
        namespace=stack.namespace,
        status=status,
        reason=reason,
        message=message,
        **match,
    )


async def _one_runner(stack: Stack) -> dict[str, Any]:
    """An ARS with one registered runner (its pod creation is what the tests refuse)."""
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers)
    await stack.scale("solo", 1, 0)

    async def registered() -> dict[str, Any] | None:
        runners = await stack.list("EphemeralRunner")
        if len(runners) == 1 and (runners[0].get("status") or {}).get("runnerId"):
            return runners[0]
        return None

    runner: dict[str, Any] = await eventually(registered)
    return runner


def _phase(phase: str) -> Callable[[dict[str, Any] | None], bool]:
    """A runner's cached document is in ``phase``."""
    return lambda er: er is not None and (er.get("status") or {}).get("phase") == phase


async def _pods(stack: Stack) -> list[str]:
    return [p["metadata"]["name"] for p in await stack.list("Pod")]


async def _status(stack: Stack, name: str) -> dict[str, Any]:
    er = await stack.kube.get("EphemeralRunner", name, stack.namespace)
    status: dict[str, Any] = er.get("status") or {}
    return status


async def test_quota_refusal_keeps_the_runner_and_retries_until_the_pod_is_created(
    resyncing_stack: Stack, kube_emulator: KubeEmulator
) -> None:
    stack = resyncing_stack
    quota = _refuse_pods(kube_emulator, stack, 403, "Forbidden", QUOTA_PREFIX)
    er = await _one_runner(stack)
    name = er["metadata"]["name"]

    async def retried() -> bool:
        return quota.hits >= 3

    await eventually(retried)
    assert await _pods(stack) == []
    status = await _status(stack, name)
    assert status.get("phase") != "Failed"
    assert [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")] == [name]
    assert stack.rpc.remove_requests == []

    quota.remove()  # the quota has room again

    async def pod_created() -> bool:
        return await _pods(stack) == [name]

    await eventually(pod_created)
    assert [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")] == [name]


async def test_quota_refusal_past_ten_minutes_replaces_the_runner(
    stack: Stack, kube_emulator: KubeEmulator
) -> None:
    quota = _refuse_pods(kube_emulator, stack, 403, "Forbidden", QUOTA.format(name="runner"))
    er = await _one_runner(stack)
    name, runner_id = er["metadata"]["name"], er["status"]["runnerId"]

    async def refused() -> bool:
        return quota.hits >= 1

    await eventually(refused)
    assert [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")] == [name]
    assert await _pods(stack) == []
    # From now on only this runner's pod is over quota, so its replacement is not.
    this_runner = _refuse_pods(
        kube_emulator, stack, 403, "Forbidden", QUOTA.format(name=name), name_prefix=name
    )
    quota.remove()

    stack.clock.offset = timedelta(minutes=10, seconds=5)  # the runner is now older than the window
    # Ten minutes "passed" at once: the periodic resync stands for the runner's retry that would
    # have come in that time.
    await stack.app.resync()

    async def original_gone() -> bool:
        return name not in {r["metadata"]["name"] for r in await stack.list("EphemeralRunner")}

    await eventually(original_gone)
    assert this_runner.hits >= 1
    assert runner_id in stack.rpc.removed  # deleted the normal way: deregistered first
    deletes = [
        e
        for e in await stack.audit_events()
        if e.action == "deleted" and e.kind == "EphemeralRunner" and e.name == name
    ]
    assert deletes
    assert "quota" in deletes[0].why

    async def replaced() -> str | None:
        runners = [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")]
        pods = await _pods(stack)
        return runners[0] if len(runners) == 1 and runners == pods else None

    replacement = await eventually(replaced)
    assert replacement != name


async def test_pod_security_refusal_marks_the_runner_failed_invalid_pod(
    stack: Stack, kube_emulator: KubeEmulator
) -> None:
    refusal = _refuse_pods(kube_emulator, stack, 403, "Forbidden", POD_SECURITY)
    er = await _one_runner(stack)
    name = er["metadata"]["name"]

    async def failed() -> dict[str, Any] | None:
        status = await _status(stack, name)
        return status if status.get("phase") == "Failed" else None

    status = await eventually(failed)
    assert status["reason"] == "InvalidPod"
    assert status["message"] == f"Failed to create the pod: {POD_SECURITY}"
    await stack.handled("EphemeralRunner", name, _phase("Failed"))  # its removal calls too
    await stack.wait_idle()  # and no retry on a timer
    assert refusal.hits == 1  # not retried
    assert await _pods(stack) == []
    assert stack.rpc.remove_requests == []  # §3.6: only Invalid also removes the runner
    lifecycle = [
        e
        for e in await stack.all_events()
        if isinstance(e, RunnerLifecycle) and e.runner_name == name and e.phase == "Failed"
    ]
    assert lifecycle
    assert lifecycle[0].reason == "InvalidPod"


async def test_invalid_pod_marks_the_runner_failed_and_removes_it_from_the_service(
    stack: Stack, kube_emulator: KubeEmulator
) -> None:
    refusal = _refuse_pods(kube_emulator, stack, 422, "Invalid", INVALID)
    er = await _one_runner(stack)
    name, runner_id = er["metadata"]["name"], er["status"]["runnerId"]

    async def removed() -> bool:
        return runner_id in stack.rpc.removed

    await eventually(removed)
    status = await _status(stack, name)
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidPod")
    assert status["message"] == f"Failed to create the pod: {INVALID}"
    await stack.handled("EphemeralRunner", name, _phase("Failed"))
    await stack.wait_idle()
    assert refusal.hits == 1
    assert await _pods(stack) == []
    assert stack.rpc.remove_requests == [runner_id]  # once


async def _one_runner_as(stack: Stack, ars: str, service_account: str) -> None:
    """A set whose runner pods run as ``service_account``, scaled to one runner."""
    template = {
        "spec": {
            "serviceAccountName": service_account,
            "containers": [{"name": "runner", "image": "runner:1", "command": ["run.sh"]}],
        }
    }
    await stack.register(ars, "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, ars, template=template))
    await eventually(lambda: stack.list("EphemeralRunnerSet"), what="the runner set")
    await stack.scale(ars, 1, 1)


async def test_a_pod_refused_for_a_missing_service_account_is_retried(
    stack: Stack, on_real_server: bool
) -> None:
    """On a real server (the ServiceAccount admission plugin; the emulator has no admission):
    a runner pod naming a service account that does not exist yet is refused 403 ("error
    looking up service account"), as a new namespace's ``default`` one is for its first
    moment. That refusal goes away by itself: retried with backoff, never ``Failed``."""
    if not on_real_server:
        pytest.skip("the emulator has no ServiceAccount admission")
    await _one_runner_as(stack, "late", "late-runner")

    async def registered() -> dict[str, Any] | None:
        runners = await stack.list("EphemeralRunner")
        if len(runners) == 1 and (runners[0].get("status") or {}).get("runnerId"):
            return runners[0]
        return None

    runner = await eventually(registered, what="one registered runner")
    name = runner["metadata"]["name"]
    assert await stack.list("Pod") == []
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "late-runner", "namespace": stack.namespace},
        }
    )

    async def pod_created() -> bool:
        pods = [p["metadata"]["name"] for p in await stack.list("Pod")]
        assert pods == [name], f"pods {pods}"
        return True

    await eventually(pod_created, within=15, what="the runner pod once its account exists")
    live = await stack.kube.get("EphemeralRunner", name, stack.namespace)
    assert (live.get("status") or {}).get("phase") != "Failed", live.get("status")
    phases = [e.phase for e in await stack.all_events() if isinstance(e, RunnerLifecycle)]
    assert "Failed" not in phases


async def test_a_refused_pod_is_named_on_the_runner_the_set_and_by_doctor(
    counted_stack: Stack, reader: InMemoryMetricReader, on_real_server: bool
) -> None:
    """Issue 33, on the real server: a variant whose ServiceAccount does not exist. The API
    server's own message is in a ``RunnerPodRefused`` Warning Event on the EphemeralRunner
    and on the ARS (once, however often the pod is retried), and ``arcflow doctor``'s
    finding for the variant quotes it. No token in any of them."""
    if not on_real_server:
        pytest.skip("the emulator has no ServiceAccount admission")
    stack = counted_stack
    await _one_runner_as(stack, "gone", "taken-away")

    async def refused_on_both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        events = await stack.events("RunnerPodRefused")
        on_runner = [e for e in events if e["involvedObject"]["kind"] == "EphemeralRunner"]
        on_set = [e for e in events if e["involvedObject"]["kind"] == "AutoscalingRunnerSet"]
        return (on_runner, on_set) if on_runner and on_set else None

    on_runner, on_set = await eventually(refused_on_both, within=20, what="the refusal Events")
    runner = on_runner[0]["involvedObject"]["name"]
    said = 'serviceaccount "taken-away" not found'
    assert said in on_runner[0]["message"], on_runner[0]["message"]
    assert on_runner[0]["message"].startswith(f"pod {runner} refused by the API server: ")
    assert on_set[0]["message"].startswith("the default variant: pod ")
    assert said in on_set[0]["message"]
    assert {e["type"] for e in on_runner + on_set} == {"Warning"}
    failed = metric_total(reader, "arcflow_reconciler_errors")

    async def retried() -> bool:  # each refused create is a failed pass, retried with backoff
        return metric_total(reader, "arcflow_reconciler_errors") >= failed + 2

    await eventually(retried, within=20, what="two more refused pod creates")
    again = await stack.events("RunnerPodRefused")
    assert len(again) == 2, [e["message"] for e in again]  # retried, not said again
    assert all(TOKEN not in e["message"] for e in again)

    snap = await read_cluster(stack.kube, stack.namespace)
    snap.now += timedelta(minutes=2)  # past doctor's "work in progress" minute
    findings = [f for f in diagnose(snap) if f.ars == "gone" and f.check == "runners"]
    assert findings, diagnose(snap)
    assert said in findings[0].why
    assert runner in findings[0].fix
