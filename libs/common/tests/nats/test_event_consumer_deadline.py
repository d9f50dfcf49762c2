"""The listener's light path (``EventConsumer``, its job batches) has the deadline every
subscription handler has: a call that overruns is abandoned and retried (issue 32, item 5)."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest

from arcflow.common import subjects
from arcflow.common.events import EventBase, JobsBatch, JobStatistics
from arcflow.common.nats import (
    ConsumerSpec,
    Delivery,
    EventConsumer,
    Outcome,
    ensure_jetstream,
    publish_event,
)
from arcflow.common.nats.consume import DEADLINE_SHARE_OF_ACK_WAIT, HandlerDeadlineExceededError
from arcflow.devstack.nats_server import NatsServer

pytestmark = pytest.mark.integration


def test_the_default_deadline_is_the_share_of_the_ack_wait_the_services_use() -> None:
    spec = ConsumerSpec("t", "ARC_JOBS", "arc.jobs.>", ack_wait_seconds=30.0)

    async def handle(event: EventBase, delivery: Delivery) -> None:
        return None

    consumer = EventConsumer(spec, handle, service="test")
    assert consumer.deadline_seconds == 30.0 * DEADLINE_SHARE_OF_ACK_WAIT
    assert EventConsumer(spec, handle, service="t", deadline_seconds=2).deadline_seconds == 2


async def test_an_overrunning_handler_is_abandoned_and_its_message_redelivered(
    private_nats_server: NatsServer,
) -> None:
    nc = await nats.connect(private_nats_server.url)
    try:
        js = nc.jetstream()
        await ensure_jetstream(js, consumers=[])
        spec = ConsumerSpec("t-deadline", "ARC_JOBS", "arc.jobs.>", ack_wait_seconds=5.0)
        await js.add_consumer(spec.stream, config=spec.to_config())
        subject = subjects.jobs_subject("arc", "big")
        batch = JobsBatch(
            source="listener",
            scale_set_id=1,
            message_id=1,
            statistics=JobStatistics(total_assigned_jobs=1),
        )
        await publish_event(js, subject, batch)
        calls: list[int] = []
        cancelled = asyncio.Event()

        async def handle(event: EventBase, delivery: Delivery) -> None:
            calls.append(delivery.delivery_count)
            if delivery.delivery_count == 1:
                try:
                    await asyncio.Event().wait()  # a stuck Kubernetes write, say
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

        consumer = EventConsumer(
            spec, handle, service="test", event_types=(JobsBatch,), deadline_seconds=0.3
        )
        sub = await js.pull_subscribe(subject, durable=spec.durable, stream=spec.stream)
        [first] = await sub.fetch(1, timeout=5)
        started = time.monotonic()
        assert await consumer.process(first) is Outcome.RETRY
        assert time.monotonic() - started < 3.0, "the handler call was not bounded"
        assert cancelled.is_set()
        # nak'd with the retry delay: it comes again, well before the ack wait, and succeeds
        [second] = await sub.fetch(1, timeout=10)
        assert await consumer.process(second) is Outcome.ACKED
        assert calls == [1, 2]
    finally:
        await nc.close()


def test_the_deadline_error_is_the_subscribers_one() -> None:
    from arcflow.common.service import subscribers

    assert subscribers.HandlerDeadlineExceededError is HandlerDeadlineExceededError
    assert issubclass(HandlerDeadlineExceededError, TimeoutError)
