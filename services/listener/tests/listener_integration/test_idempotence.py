"""Publish before ack: a crash between JetStream's PubAck and GitHub's ack loses nothing and
scales nothing twice, in one process (JetStream's duplicate answer) and across a restart (the
watermark the last ``scale.decision`` names)."""

from __future__ import annotations

import nats
import pytest

from arcflow.common.events import JobsBatch, parse_event
from arcflow.listener.app import Listener

from .helpers import (
    ARS,
    ListenerRig,
    RunningListener,
    Variant,
    eventually,
    ready,
    stream_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


async def test_crash_after_publish_before_ack_loses_nothing_and_scales_once(
    rig: ListenerRig,
) -> None:
    sim = rig.sim
    variants = [Variant("cpu", 0, 10), Variant("gpu", 0, 10)]
    token, ids = await rig.register(variants)
    crashed: list[int] = []

    async def crash_once(batch: JobsBatch) -> None:
        if not crashed:
            crashed.append(batch.message_id)
            raise RuntimeError("simulated crash between the PubAck and GitHub's ack")

    options = rig.options()
    options.after_publish = {ids["cpu"]: crash_once}
    listener = Listener(rig.config(token, variants, ids), options=options)
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(s["session"] is not None for s in snap["scaleSets"]),
        )
        sim.enqueue_jobs(3, ["self-hosted-cpu"])
        sim.enqueue_jobs(2, ["self-hosted-gpu"])
        await eventually(
            lambda: rig.ers_specs(variants),
            lambda s: (s["cpu"].get("replicas"), s["gpu"].get("replicas")) == (3, 2),
        )
        cpu = next(u for u in listener.units if u.target.variant == "cpu")
        # The redelivered message was acked on GitHub after the restart: its queue drains.
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(not s["queue"]["messageIds"] for s in snap["scaleSets"]),
        )
    assert crashed, "the crash hook never ran"
    assert cpu.pump_stats.failures == 1
    assert cpu.pump_stats.starts == 2
    # Stored once on the stream (Nats-Msg-Id de-duplication), decided once.
    stored = [
        parse_event(data)
        for _h, data in await stream_events(rig.nats_url, f"arc.jobs.{rig.namespace}.{ARS}.cpu")
    ]
    stored_ids = [e.message_id for e in stored if isinstance(e, JobsBatch)]
    assert stored_ids.count(crashed[0]) == 1
    assert len(stored_ids) == len(set(stored_ids))
    handled = [d for d in cpu.decider.decisions if d.was_dirty or d.assigned_jobs]
    assert handled, "no decision on a batch"
    jobs_seen = sum(len(e.jobs) for e in stored if isinstance(e, JobsBatch))
    assert jobs_seen == 3  # three JobAssigned, none lost, none twice
    assert cpu.decider.skipped_batches == 0


async def test_a_restarted_listener_resumes_after_the_last_decided_batch(
    rig: ListenerRig,
) -> None:
    """The listener reads no batch back from the stream (ADR 0104): a copy stored there by
    anyone is never scaled on, and a restarted listener resumes from the batch its last
    ``scale.decision`` names, so GitHub's redelivery of it (JetStream answers with the
    sequence of the stored copy) is not scaled again."""
    sim = rig.sim
    variants = [Variant("cpu", 0, 10)]
    token, ids = await rig.register(variants)
    config = rig.config(token, variants, ids)
    subject = f"arc.jobs.{rig.namespace}.{ARS}.cpu"

    first = Listener(config, options=rig.options())
    async with RunningListener(first):
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: snap["scaleSets"][0]["session"] is not None,
        )
        sim.enqueue_jobs(2, ["self-hosted-cpu"])
        await eventually(
            lambda: rig.ers_specs(variants),
            lambda s: s["cpu"].get("replicas") == 2,
        )
    stored = await stream_events(rig.nats_url, subject)
    _headers, last_data = stored[-1]
    last = parse_event(last_data)
    assert isinstance(last, JobsBatch)

    # The same GitHub message stored again under another Nats-Msg-Id: nobody reads it back.
    nc = await nats.connect(rig.nats_url)
    try:
        js = nc.jetstream()
        await js.publish(subject, last_data, headers={"Nats-Msg-Id": "late-copy"})
    finally:
        await nc.close()

    second = Listener(config, options=rig.options())
    async with RunningListener(second):
        await eventually(lambda: ready(len(second.units)), lambda n: n == 1)
        decider = second.units[0].decider
        mark = await eventually(lambda: ready(decider.watermark), lambda m: m is not None)
        assert mark is not None
        assert (mark.session_id, mark.message_id) == (last.session_id, last.message_id)
        # GitHub redelivers it after a crash before its ack: JetStream's duplicate answer
        # names the stored copy's sequence, at or below the restored watermark.
        assert await decider.batch(last, mark.stream_seq) is None
        assert decider.skipped_batches == 1
    assert not [d for d in decider.decisions if d.was_dirty]
    specs = await rig.ers_specs(variants)
    assert specs["cpu"]["replicas"] == 2
