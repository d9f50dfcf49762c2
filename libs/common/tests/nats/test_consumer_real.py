"""The reliable consumer against a real nats-server: faststream durable pull, DLQ, traces."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable

import nats
import pytest
from faststream.nats import NatsBroker
from nats.js import JetStreamContext
from opentelemetry import trace

from arcflow.common import subjects
from arcflow.common.events import (
    DeadLetter,
    EventBase,
    JobsBatch,
    JobStatistics,
    K8sObjectChanged,
    parse_event,
)
from arcflow.common.nats import (
    ConsumerSpec,
    Delivery,
    NatsSettings,
    PermanentEventError,
    ensure_jetstream,
    jetstream_of,
    make_broker,
    publish_event,
)
from arcflow.common.service.subscribers import DEFAULT_BATCH_WINDOW_SECONDS
from arcflow.common.telemetry import setup_tracing
from arcflow.devstack.nats_server import NatsServer

from ._subscribe import attach_consumer

pytestmark = pytest.mark.integration

SECRET = "ghs_" + "Q" * 36


async def _until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.02)


async def _dead_letters(js: JetStreamContext, expected: int) -> list[DeadLetter]:
    deadline = time.monotonic() + 10
    while (await js.stream_info("ARC_DLQ")).state.messages < expected:
        assert time.monotonic() < deadline, "dead letters did not arrive"
        await asyncio.sleep(0.02)
    letters = []
    for seq in range(1, expected + 1):
        stored = await js.get_msg("ARC_DLQ", seq)
        event = parse_event(stored.data or b"")
        assert isinstance(event, DeadLetter)
        assert stored.subject == subjects.dlq_subject(event.original_subject)
        letters.append(event)
    return letters


def _batch(message_id: int) -> JobsBatch:
    return JobsBatch(
        source="listener",
        scale_set_id=9,
        message_id=message_id,
        statistics=JobStatistics(total_assigned_jobs=message_id),
    )


@pytest.fixture
async def broker(private_nats_server: NatsServer) -> AsyncIterator[NatsBroker]:
    broker = make_broker(NatsSettings(url=private_nats_server.url, name="test"), "test")
    async with broker:
        await broker.connect()
        await ensure_jetstream(jetstream_of(broker), consumers=[])
        yield broker


async def test_typed_event_round_trip_with_trace(broker: NatsBroker) -> None:
    setup_tracing("test")
    seen: list[tuple[EventBase, Delivery, int]] = []

    async def handle(event: EventBase, delivery: Delivery) -> None:
        seen.append((event, delivery, trace.get_current_span().get_span_context().trace_id))

    spec = ConsumerSpec("t-k8s", "ARC_K8S", subjects.k8s_filter("autoscalingrunnersets"))
    attach_consumer(broker, spec, handle, event_types=(K8sObjectChanged,), fetch_timeout=0.2)
    await broker.start()
    subject = subjects.k8s_subject("autoscalingrunnersets", "arc", "big.one")
    event = K8sObjectChanged(
        source="watcher",
        api_version="actions.github.com/v1alpha1",
        kind="AutoscalingRunnerSet",
        resource="autoscalingrunnersets",
        namespace="arc",
        name="big.one",
        uid="u1",
        change="ADDED",
        resource_version="5",
        labels={"app": "x"},
    )
    with trace.get_tracer("test").start_as_current_span("watch") as span:
        ack = await publish_event(broker, subject, event)
        trace_id = span.get_span_context().trace_id
    assert ack is not None
    assert ack.stream == "ARC_K8S"
    await _until(lambda: len(seen) == 1)
    got, delivery, handler_trace = seen[0]
    assert isinstance(got, K8sObjectChanged)
    assert got.name == "big.one"
    assert got.id == event.id
    assert got.trace is not None
    assert got.trace.traceparent.split("-")[1] == f"{trace_id:032x}"
    assert handler_trace == trace_id  # one trace from publisher to handler
    assert delivery.delivery_count == 1
    assert delivery.subject == subject
    js = jetstream_of(broker)
    info = await js.consumer_info("ARC_K8S", "t-k8s")
    deadline = time.monotonic() + 5
    while info.num_ack_pending and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        info = await js.consumer_info("ARC_K8S", "t-k8s")
    assert info.num_ack_pending == 0
    assert info.num_pending == 0
    assert info.ack_floor.stream_seq == 1

    # a valid event of a type the subscription does not declare: acked and skipped
    await publish_event(broker, subject, _batch(5))
    while (info.ack_floor.stream_seq, info.num_ack_pending) != (2, 0):
        assert time.monotonic() < deadline + 5, "the undeclared event was not acked"
        await asyncio.sleep(0.02)
        info = await js.consumer_info("ARC_K8S", "t-k8s")
    assert len(seen) == 1
    assert (await js.stream_info("ARC_DLQ")).state.messages == 0


WINDOW = min(0.25, DEFAULT_BATCH_WINDOW_SECONDS)


async def test_sparse_events_are_each_handled_within_their_batch_window(
    broker: NatsBroker,
) -> None:
    """Events that arrive one by one, at odd moments of the subscriber's batch window, are each
    handled at once, none left unacknowledged for the ack wait: the window's fetched messages
    are never dropped (nats-py 2.15 and 2.16 raised a plain TimeoutError from a late fetch,
    which ended FastStream's batch loop without them, docs/service-skeleton.md)."""
    handled: dict[int, asyncio.Event] = {n: asyncio.Event() for n in range(60)}

    async def handle(event: EventBase, delivery: Delivery) -> None:
        assert isinstance(event, JobsBatch)
        handled[event.message_id].set()

    spec = ConsumerSpec("t-sparse", "ARC_SCALE", "arc.scale.>", ack_wait_seconds=20)
    # the window is the fetch timeout when that is shorter than the default (1 s): 60 events at
    # odd moments of a 1 s window would take a minute, and the mechanism is the same
    attach_consumer(broker, spec, handle, event_types=(JobsBatch,), fetch_timeout=WINDOW)
    await broker.start()
    js = jetstream_of(broker)
    late = []
    for n, done in handled.items():
        await publish_event(broker, "arc.scale.9", _batch(n))
        try:  # a dropped window would wait the whole 20 s ack wait
            await asyncio.wait_for(done.wait(), 5)
        except TimeoutError:
            late.append(n)
            await asyncio.wait_for(done.wait(), 30)
        # a different moment of the batch window each time
        await asyncio.sleep(WINDOW * (n % 9) / 8)
    assert late == [], f"events {late} waited for the ack wait"
    info = await js.consumer_info("ARC_SCALE", "t-sparse")
    assert (info.num_ack_pending, info.num_pending, info.num_redelivered) == (0, 0, 0)


async def test_malformed_and_failing_messages_are_dead_lettered_and_consuming_goes_on(
    broker: NatsBroker, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: dict[int, int] = {}
    handled: list[int] = []

    async def handle(event: EventBase, delivery: Delivery) -> None:
        assert isinstance(event, JobsBatch)
        attempts[event.message_id] = attempts.get(event.message_id, 0) + 1
        if event.message_id == 666:
            raise RuntimeError(f"GitHub said no (token {SECRET})")
        if event.message_id == 777:
            raise PermanentEventError("scale set 9 no longer exists")
        handled.append(event.message_id)

    spec = ConsumerSpec(
        "t-jobs",
        "ARC_JOBS",
        "arc.jobs.>",
        max_deliver=3,
        retry_delay_seconds=0.05,
        retry_delay_cap_seconds=0.1,
    )
    attach_consumer(broker, spec, handle, fetch_timeout=0.2)
    await broker.start()
    js = jetstream_of(broker)
    subject = subjects.jobs_subject("arc", "big", "gpu")
    caplog.set_level(logging.DEBUG)

    malformed = json.dumps({"type": "jobs.batch", "source": "x", "token": SECRET}).encode()
    await js.publish(subject, malformed, stream="ARC_JOBS")
    await publish_event(js, subject, _batch(666))
    await publish_event(js, subject, _batch(777))
    await publish_event(js, subject, _batch(1))

    await _until(lambda: handled == [1])
    letters = await _dead_letters(js, 3)
    by_reason = {d.reason.split(":")[0]: d for d in letters}
    assert set(by_reason) == {
        "malformed event",
        "handler failed attempt 3 of 3; last error",
        "permanent failure",
    }

    bad = by_reason["malformed event"]
    assert "scale_set_id: Field required" in bad.reason
    assert bad.delivery_count == 1
    assert bad.keys.namespace == "arc"
    assert bad.keys.variant == "gpu"
    assert SECRET not in bad.payload
    assert '"source": "x"' in bad.payload
    assert bad.payload_size == len(malformed)
    assert bad.consumer == "t-jobs"

    failing = by_reason["handler failed attempt 3 of 3; last error"]
    assert attempts[666] == 3
    assert failing.delivery_count == 3
    assert "RuntimeError: GitHub said no" in failing.reason
    assert SECRET not in failing.reason
    assert failing.original_msg_id == "jobs.batch:9:666"
    assert attempts[777] == 1
    assert by_reason["permanent failure"].delivery_count == 1

    # Originals are settled (termed/acked), the consumer is empty, and keeps consuming.
    await publish_event(js, subject, _batch(2))
    await _until(lambda: handled == [1, 2])
    info = await js.consumer_info("ARC_JOBS", "t-jobs")
    assert info.num_pending == 0
    assert SECRET not in caplog.text  # neither payloads nor error texts leak into logs
    assert "message dead-lettered" in caplog.text


async def test_delivery_beyond_max_deliver_after_a_crash_is_dead_lettered(
    private_nats_server: NatsServer, broker: NatsBroker
) -> None:
    """A process that died mid-attempt: the spare server delivery is dead-lettered, not lost."""
    spec = ConsumerSpec("t-crash", "ARC_SCALE", "arc.scale.>", max_deliver=1, ack_wait_seconds=0.3)
    js = jetstream_of(broker)
    await js.add_consumer(spec.stream, config=spec.to_config())
    subject = subjects.scale_subject("arc", "big")
    await js.publish(subject, b'{"type": "scale.decision"}', stream="ARC_SCALE")

    # "crashed" worker: fetches the message and never settles it
    nc = await nats.connect(private_nats_server.url)
    try:
        sub = await nc.jetstream().pull_subscribe(subject, durable=spec.durable, stream=spec.stream)
        fetched = await sub.fetch(1, timeout=2)
        assert fetched[0].metadata.num_delivered == 1
    finally:
        await nc.close()

    called: list[EventBase] = []

    async def handle(event: EventBase, delivery: Delivery) -> None:
        called.append(event)

    attach_consumer(broker, spec, handle, fetch_timeout=0.2)
    await broker.start()
    [letter] = await _dead_letters(js, 1)
    assert letter.delivery_count == 2
    assert "over max_deliver 1" in letter.reason
    assert letter.id == "dlq-ARC_SCALE-1"
    assert not called
