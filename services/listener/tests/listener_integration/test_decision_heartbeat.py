"""ADR 0061: an idle ``scale.decision`` that changes nothing is published at most once per
heartbeat per scale set; a change, a new session's decision and every batch's decision are
published at once, and a restarted worker still resumes from the last batch's watermark.
Real nats-server and kube-apiserver; the worker's clock is the test's."""

from __future__ import annotations

import asyncio

import nats
import pytest

from arcflow.common.events import JobInfo, JobStatistics, ScaleDecision, parse_event
from arcflow.common.nats import STREAM_JOBS, STREAM_SCALE, ensure_stream, publish_event
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.pump import StatisticsTick
from arcflow.listener.scaler import DesiredRunnerScaler
from arcflow.listener.worker import ScaleSetWorker

from .helpers import ARS, ListenerRig, Variant, create_runner_sets, eventually, jobs_batch, ready
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


def _tick(assigned: int, reason: str = "idle", last_message_id: int = 0) -> StatisticsTick:
    stats = JobStatistics(total_assigned_jobs=assigned)
    return StatisticsTick(stats, last_message_id, reason, "s1")


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

        def worker() -> ScaleSetWorker:
            return ScaleSetWorker(
                target,
                js,
                rig.kube,
                DesiredRunnerScaler(target.min_runners, target.max_runners),
                fetch_timeout=0.2,
                clock=clock,
                decision_heartbeat=HEARTBEAT,
            )

        first = worker()
        stop = asyncio.Event()
        running = asyncio.ensure_future(first.run(stop))
        await first.initial_decision(_tick(0, "session"))
        for _ in range(5):  # idle at minRunners: forced patchID 0 again and again
            clock.now += 5
            await first.apply_tick(_tick(0))
        assert [d.reason for d in await _decisions(rig)] == ["session"]
        assert first.decisions_unpublished == 5

        clock.now += HEARTBEAT  # the heartbeat is due: the same decision once more
        await first.apply_tick(_tick(0))
        await first.apply_tick(_tick(0))
        assert [d.reason for d in await _decisions(rig)] == ["session", "idle"]

        await first.apply_tick(_tick(2))  # a change is published at once
        decisions = await _decisions(rig)
        assert [(d.reason, d.desired_replicas) for d in decisions][-1] == ("idle", 2)
        replicas = (await rig.ers_specs([CPU]))["cpu"]["replicas"]
        assert replicas == 2

        # A batch is always published (it moves the watermark), even when it changes nothing.
        batch = jobs_batch(target, "s1", 1, 2, JobInfo(message_type="JobAssigned"))
        await publish_event(js, target.jobs_subject, batch)
        await eventually(
            lambda: _decisions(rig), lambda found: found[-1].reason.startswith("message 1")
        )
        published = len(await _decisions(rig))
        clock.now += 1
        # A new patchID at 2 runners (upstream numbers every call off minRunners): a patch.
        await first.apply_tick(_tick(2, last_message_id=1))
        clock.now += 1
        assert len(await _decisions(rig)) == published + 1
        stop.set()
        await running

        # A restarted worker resumes after the batch: the idle decisions after it carried
        # the same watermark headers, so the last decision still names it.
        second = worker()
        stop = asyncio.Event()
        running = asyncio.ensure_future(second.run(stop))
        mark = await eventually(lambda: ready(second.watermark), lambda m: m is not None)
        assert (mark.session_id, mark.message_id) == ("s1", 1)
        stop.set()
        await running
    finally:
        await nc.close()
