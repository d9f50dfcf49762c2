"""ADR 0043: a batch that completed no job and leaves the count as last written sends no ERS
patch; a JobCompleted with the same count still does, and the finished runner is replaced.

Real nats-server, the real kube-apiserver and the real reconciler (the watcher played by the
harness's change events); the decision is fed batches as its pump feeds them, and talks
to the server through the fault proxy, which counts its ERS writes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.constants import ANNOTATION_JOB_COMPLETED
from arcflow.common.events import JobInfo, JobsBatch
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.devstack.nats_server import NatsServer
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import decider_for
from services.reconciler.tests.reconciler_integration.harness import (
    Stack,
    ars_manifest,
    build_stack,
)
from tests.polling import eventually

from .helpers import jobs_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SUCCEEDED = {
    "phase": "Succeeded",
    "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
}


def _batch(target: ScaleSetTarget, message_id: int, assigned: int, *jobs: JobInfo) -> JobsBatch:
    return jobs_batch(target, "session-1", message_id, assigned, *jobs)


def _ers_writes(proxy: KubeFaultProxy) -> int:
    """The listener's writes to the ERS object itself (not its status subresource)."""
    return sum(
        1
        for r in proxy.requests
        if r.method == "PATCH" and r.path.endswith("/ephemeralrunnersets/solo")
    )


async def _runners(stack: Stack) -> list[dict[str, Any]]:
    async def registered() -> list[dict[str, Any]] | None:
        runners = await stack.list("EphemeralRunner")
        ok = len(runners) == 1 and all((r.get("status") or {}).get("runnerId") for r in runners)
        return runners if ok else None

    found: list[dict[str, Any]] = await eventually(registered)
    return found


async def test_started_only_batch_skips_the_ers_patch_and_completed_one_replaces_the_runner(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    kube_proxy: KubeFaultProxy,
    tmp_path: Path,
) -> None:
    settings = KubeSettings(
        kubeconfig=str(kube_proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")),
        qps=1000,
        burst=1000,
    )
    async with (
        await KubeClient.from_settings(settings) as listener_kube,
        build_stack(private_nats_server.url, kube_client, kube_namespace) as stack,
    ):
        await stack.register("solo", "", 7)
        await stack.apply_ars(ars_manifest(kube_namespace, "solo"))
        await eventually(lambda: stack.list("EphemeralRunnerSet"))
        target = ScaleSetTarget(
            scale_set_id=7,
            namespace=kube_namespace,
            ars="solo",
            variant="",
            ephemeral_runner_set_name="solo",
            min_runners=0,
            max_runners=10,
            owner="listener-pod-1",
        )
        now = [0.0]
        decider = decider_for(target, stack.js, listener_kube, clock=lambda: now[0])

        async def handle(batch: JobsBatch) -> None:
            await decider.batch(batch)

        # Job 1 assigned: replicas 1 under a new patch id, one runner.
        await handle(_batch(target, 1, 0))
        await handle(_batch(target, 2, 1, JobInfo(message_type="JobAssigned", job_id="1")))
        first = (await _runners(stack))[0]["metadata"]["name"]
        ers = await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace)
        assert (ers["spec"]["replicas"], ers["spec"]["patchID"]) == (1, 1)
        writes = _ers_writes(kube_proxy)

        # Job 1 started on it, count unchanged: the runner's status is written, the ERS is not.
        started = JobInfo(message_type="JobStarted", job_id="1", runner_name=first)
        await handle(_batch(target, 3, 1, started))
        runner = await kube_client.get("EphemeralRunner", first, kube_namespace)
        assert runner["status"]["jobId"] == "1"
        assert _ers_writes(kube_proxy) == writes
        ers_after = await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace)
        assert ers_after["spec"] == ers["spec"]
        assert decider.unchanged_batches == 1

        # Job 1 ends (its runner exits and is deleted); job 2 is assigned in the same message,
        # so the count stays 1: the JobCompleted still patches, and a new runner serves job 2.
        await stack.set_pod_status(first, SUCCEEDED)

        async def first_gone() -> bool:
            return first not in {r["metadata"]["name"] for r in await stack.list("EphemeralRunner")}

        await eventually(first_gone)
        await handle(
            _batch(
                target,
                4,
                1,
                JobInfo(message_type="JobCompleted", job_id="1", runner_name=first),
                JobInfo(message_type="JobAssigned", job_id="2"),
            )
        )
        assert _ers_writes(kube_proxy) == writes + 1
        ers = await kube_client.get("EphemeralRunnerSet", "solo", kube_namespace)
        assert (ers["spec"]["replicas"], ers["spec"]["patchID"]) == (1, 2)
        second = (await _runners(stack))[0]["metadata"]["name"]
        assert second != first

        # Past the window the same unchanged batch patches again, as upstream's listener does.
        now[0] += 31.0
        started = JobInfo(message_type="JobStarted", job_id="2", runner_name=second)
        await handle(_batch(target, 5, 1, started))
        assert _ers_writes(kube_proxy) == writes + 2
        assert decider.unchanged_batches == 1

        # Job 2 completes while its runner's pod still runs: the decision writes GitHub's finish
        # time on the runner, where the reconciler's grace period counts from (ADR 0100).
        finished = datetime(2026, 12, 2, 12, 0, 5, tzinfo=UTC)
        completed = JobInfo(
            message_type="JobCompleted", job_id="2", runner_name=second, finish_time=finished
        )
        await handle(_batch(target, 6, 0, completed))
        runner = await kube_client.get("EphemeralRunner", second, kube_namespace)
        annotations = runner["metadata"]["annotations"]
        assert annotations[ANNOTATION_JOB_COMPLETED] == "2026-12-02T12:00:05Z"
