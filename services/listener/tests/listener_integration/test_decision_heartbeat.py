"""ADR 0061: an idle ``scale.decision`` that changes nothing is published at most once per
heartbeat per scale set; a change, a new session's decision and every batch's decision are
published at once, and a restarted decision still resumes from the last batch's watermark.
Real nats-server and kube-apiserver; the decision's clock is the test's."""

from __future__ import annotations

import nats
import pytest

from arcflow.common.events import JobInfo, JobStatistics, ScaleDecision, parse_event
from arcflow.common.nats import STREAM_JOBS, STREAM_SCALE, ensure_stream, publish_event
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import ScaleDecider, decider_for
from arcflow.listener.ers_writer import UNCHANGED_BATCH_WINDOW

from .helpers import ARS, ListenerRig, Variant, create_runner_sets, jobs_batch
from .helpers import stream_events as stored

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CPU = Variant("cpu", 0, 50)
HEARTBEAT = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _target(namespace: str) -> ScaleSetTarget:
    return ScaleSetTarget(
        scale_set_id=9,
        namespace=namespace,
        ars=ARS,
        variant=CPU.name,
        ephemeral_runner_set_name=CPU.ers(ARS),
        min_runners=CPU.min_runners,
        max_runners=CPU.max_runners,
        owner="listener-pod-9",
    )


def _stats(assigned: int) -> JobStatistics:
    return JobStatistics(total_assigned_jobs=assigned)


async def _decisions(rig: ListenerRig) -> list[ScaleDecision]:
    found = []
    for _headers, data in await stored(rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.cpu"):
        event = parse_event(data)
        assert isinstance(event, ScaleDecision)
        found.append(event)
    return found


async def test_idle_decisions_wait_for_the_heartbeat(rig: ListenerRig) -> None:
    await create_runner_sets(rig.kube, rig.namespace, ARS, [CPU])
    target = _target(rig.namespace)
    clock = Clock()
    nc = await nats.connect(rig.nats_url)
    try:
        js = nc.jetstream()
        await ensure_stream(js, STREAM_JOBS)
        await ensure_stream(js, STREAM_SCALE)

        def decider() -> ScaleDecider:
            return decider_for(target, js, rig.kube, clock=clock, heartbeat=HEARTBEAT)

        first = decider()
        await first.restore()
        await first.statistics(_stats(0), "session")
        for _ in range(5):  # idle at minRunners: forced patchID 0 again and again
            clock.now += 5
            await first.statistics(_stats(0), "idle")
        assert [d.reason for d in await _decisions(rig)] == ["session"]
        assert first.publisher.unpublished == 5
        # An empty poll completes no job: the unchanged count is not patched again within the
        # window either (ADR 0043 and its amendment in ADR 0104).
        assert first.unchanged_batches == 5

        clock.now += HEARTBEAT  # the heartbeat is due: the same decision once more
        await first.statistics(_stats(0), "idle")
        await first.statistics(_stats(0), "idle")
        reasons = [d.reason.split(";")[0] for d in await _decisions(rig)]
        assert reasons == ["session", "idle"]

        await first.statistics(_stats(2), "idle")  # a change is published at once
        decisions = await _decisions(rig)
        assert [(d.reason, d.desired_replicas) for d in decisions][-1] == ("idle", 2)
        replicas = (await rig.ers_specs([CPU]))["cpu"]["replicas"]
        assert replicas == 2

        # A batch is always published (it moves the watermark), even when it changes nothing.
        batch = jobs_batch(target, "s1", 1, 2, JobInfo(message_type="JobAssigned"))
        ack = await publish_event(js, target.jobs_subject, batch)
        assert ack is not None
        await first.batch(batch, ack.seq)
        decisions = await _decisions(rig)
        assert decisions[-1].reason.startswith("message 1")
        published = len(decisions)
        clock.now += 1
        # The same count with no job completed, within the window: no patch (upstream skips
        # it too: "Skipping patch" when the count is its last patch and no job completed).
        skipped = first.unchanged_batches
        await first.statistics(_stats(2), "idle")
        assert first.unchanged_batches == skipped + 1
        assert len(await _decisions(rig)) == published
        # Past the window the unchanged count is patched again, with a new patchID.
        clock.now += UNCHANGED_BATCH_WINDOW
        await first.statistics(_stats(2), "idle")
        assert len(await _decisions(rig)) == published + 1

        # A restarted decision resumes after the batch: the idle decisions after it carried
        # the same watermark headers, so the last decision still names it.
        second = decider()
        await second.restore()
        mark = second.watermark
        assert mark is not None
        assert (mark.session_id, mark.message_id, mark.stream_seq) == ("s1", 1, ack.seq)
    finally:
        await nc.close()
