"""The reliable consumer under faststream's in-memory TestNatsBroker (no server)."""

from __future__ import annotations

from faststream.nats import JStream, NatsBroker, TestNatsBroker
from faststream.nats.annotations import NatsMessage

from arcflow.common import subjects
from arcflow.common.events import (
    DeadLetter,
    EventBase,
    JobsBatch,
    JobStatistics,
    parse_event,
)
from arcflow.common.nats import (
    ConsumerSpec,
    Delivery,
    NatsSettings,
    make_broker,
    publish_event,
)

from ._subscribe import attach_consumer

SPEC = ConsumerSpec("mem-jobs", "ARC_JOBS", "arc.jobs.>", max_deliver=1)


def _batch(message_id: int) -> JobsBatch:
    return JobsBatch(
        source="listener",
        scale_set_id=3,
        message_id=message_id,
        statistics=JobStatistics(total_assigned_jobs=message_id),
    )


async def test_events_reach_the_handler_and_bad_ones_are_dead_lettered() -> None:
    broker: NatsBroker = make_broker(NatsSettings(), "test")
    handled: list[tuple[EventBase, Delivery]] = []
    dead: list[DeadLetter] = []

    async def handle(event: EventBase, delivery: Delivery) -> None:
        if isinstance(event, JobsBatch) and event.message_id == 13:
            raise RuntimeError("unlucky")
        handled.append((event, delivery))

    attach_consumer(broker, SPEC, handle)

    # In memory, a JetStream publish reaches only subscribers of the same stream.
    @broker.subscriber(
        subjects.dlq_subject(subjects.filter_for("jobs")), stream=JStream("ARC_DLQ", declare=False)
    )
    async def on_dead(message: NatsMessage) -> None:
        event = parse_event(message.body)
        assert isinstance(event, DeadLetter)
        dead.append(event)

    subject = subjects.jobs_subject("arc", "big", "gpu")
    async with TestNatsBroker(broker) as test_broker:
        await publish_event(test_broker, subject, _batch(1))
        await test_broker.publish(b"\x00garbage", subject, stream="ARC_JOBS")
        await publish_event(test_broker, subject, _batch(13))

    assert [e.message_id for e, _ in handled if isinstance(e, JobsBatch)] == [1]
    assert handled[0][1].subject == subject
    assert handled[0][1].msg_id == "jobs.batch:3:1"
    assert [d.original_subject for d in dead] == [subject, subject]
    assert dead[0].reason.startswith("malformed event: not JSON")
    assert "RuntimeError: unlucky" in dead[1].reason
    assert dead[1].keys.variant == "gpu"
    assert dead[0].keys.ars == "big"
