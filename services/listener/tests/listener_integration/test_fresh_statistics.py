"""A worker behind its pump scales from GitHub's newest statistics, not a waiting batch's.

ADR 0028: during a burst the worker's batches wait in the stream while it handles earlier ones;
a batch's own statistics (say 20 assigned jobs) may describe jobs that finished since, and an
ERS patched with them makes the reconciler create runners for jobs that are done. The worker
takes the newest statistics its own pump received in the same session instead. Real
nats-server and Kubernetes API emulator; the ledger is filled as the pump fills it.
"""

from __future__ import annotations

import nats
import pytest

from arcflow.common.events import JobInfo, JobsBatch, JobStatistics
from arcflow.common.kube import KubeClient
from arcflow.common.nats import STREAM_SCALE, ensure_stream
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.ledger import SessionLedger
from arcflow.listener.scaler import DesiredRunnerScaler
from arcflow.listener.worker import ScaleSetWorker

from .helpers import ARS, ListenerRig, Variant, create_runner_sets, jobs_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CPU = Variant("cpu", 0, 50)


def _target(namespace: str) -> ScaleSetTarget:
    return ScaleSetTarget(
        scale_set_id=7,
        namespace=namespace,
        ars=ARS,
        variant=CPU.name,
        ephemeral_runner_set_name=CPU.ers(ARS),
        min_runners=CPU.min_runners,
        max_runners=CPU.max_runners,
        owner="listener-pod-1",
    )


def _batch(target: ScaleSetTarget, session: str, message_id: int, assigned: int) -> JobsBatch:
    job = JobInfo(message_type="JobAssigned", runner_request_id=message_id)
    return jobs_batch(target, session, message_id, assigned, job)


async def _replicas(kube: KubeClient, namespace: str) -> int:
    ers = await kube.get("EphemeralRunnerSet", CPU.ers(ARS), namespace)
    return int((ers.get("spec") or {}).get("replicas") or 0)


async def test_a_waiting_batch_is_scaled_from_the_newest_statistics_of_its_session(
    rig: ListenerRig,
) -> None:
    await create_runner_sets(rig.kube, rig.namespace, ARS, [CPU])
    nc = await nats.connect(rig.nats_url)
    try:
        js = nc.jetstream()
        await ensure_stream(js, STREAM_SCALE)
        target = _target(rig.namespace)
        ledger = SessionLedger()
        worker = ScaleSetWorker(
            target,
            js,
            rig.kube,
            DesiredRunnerScaler(target.min_runners, target.max_runners),
            ledger=ledger,
        )
        ledger.open("session-a")
        first = _batch(target, "session-a", 1, assigned=20)
        ledger.observed(1, first.statistics)
        # Nothing newer yet: the batch's own statistics.
        await worker.handle_batch(first)
        assert await _replicas(rig.kube, rig.namespace) == 20

        # The pump received messages 2 and 3 (17 of the 20 jobs finished) before the worker
        # got to message 2: message 2 is scaled from message 3's statistics.
        second = _batch(target, "session-a", 2, assigned=12)
        ledger.observed(2, second.statistics)
        ledger.observed(3, JobStatistics(total_assigned_jobs=3))
        await worker.handle_batch(second)
        assert await _replicas(rig.kube, rig.namespace) == 3
        assert worker.fresher_statistics == 1

        # Statistics of another session never stand in for this session's batch.
        ledger.open("session-b")
        ledger.observed(9, JobStatistics(total_assigned_jobs=40))
        await worker.handle_batch(_batch(target, "session-a", 4, assigned=5))
        assert await _replicas(rig.kube, rig.namespace) == 5
        assert worker.fresher_statistics == 1
    finally:
        await nc.close()
