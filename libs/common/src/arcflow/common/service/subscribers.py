"""A spec's subscriptions as FastStream subscribers (imported only when a spec has some).

Each :class:`~arcflow.common.service.spec.Subscription` becomes one durable JetStream pull
subscriber on the service's ``NatsBroker`` (ADR 0006):

* ``ack_policy=MANUAL``: FastStream never settles; the project's
  :class:`~arcflow.common.nats.EventConsumer` parses (with size/depth/integer limits), calls the
  typed handler and acks, naks with backoff or dead-letters;
* one FastStream call per fetch (``PullSub(batch=True)``), whose messages a pool of
  ``concurrency`` worker tasks settles (1: in stream order), so one slow message does not hold
  back the others fetched with it; the next fetch waits until every fetched message has a
  worker (:class:`~arcflow.common.service.settle.SettlePool`);
* ``inbox_prefix``: the service's own inbox, which the NATS permissions rely on;
* a deadline per handler call: an overrunning call is abandoned (cancelled), logged and
  retried through the same nak/backoff path as any other failure
  (:class:`~arcflow.common.service.deadline.DeadlineWatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.consume import EventConsumer
from arcflow.common.service.deadline import DeadlineWatch, HandlerDeadlineExceededError
from arcflow.common.service.settle import SettlePool

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.js import JetStreamContext

    from arcflow.common.nats.jetstream import ConsumerSpec
    from arcflow.common.service.spec import Subscription

__all__ = [
    "DEADLINE_SHARE_OF_ACK_WAIT",
    "AttachedConsumer",
    "HandlerDeadlineExceededError",
    "SettlePool",
    "attach_consumer",
    "attach_subscription",
    "build_consumer",
    "deadline_of",
    "effective_consumer",
]

#: Share of the consumer's ack wait a handler call may use before it is abandoned.
DEADLINE_SHARE_OF_ACK_WAIT = 0.8


def effective_consumer(subscription: Subscription, settings: Any) -> ConsumerSpec:
    """The subscription's consumer spec as tuned by the settings (retry delays)."""
    spec = subscription.consumer
    return subscription.tune(settings, spec) if subscription.tune is not None else spec


def deadline_of(subscription: Subscription, settings: Any, spec: ConsumerSpec) -> float:
    """Seconds one handler call may take: the declared deadline, else 80 % of the ack wait
    (past the ack wait JetStream would redeliver the message while it is still handled)."""
    if subscription.deadline_seconds is not None:
        declared = subscription.deadline_seconds(settings)
        if declared is not None:
            return declared
    return spec.ack_wait_seconds * DEADLINE_SHARE_OF_ACK_WAIT


def build_consumer(
    subscription: Subscription,
    state: Any,
    settings: Any,
    *,
    service: str,
    dead_letter_target: JetStreamContext | NatsBroker | None,
) -> EventConsumer:
    """The settling consumer for one subscription, its handler bound to ``state``."""
    spec = effective_consumer(subscription, settings)
    watch = DeadlineWatch(deadline_of(subscription, settings, spec))
    return EventConsumer(
        replace(spec),
        watch.bind(subscription.handler, state),
        service=service,
        event_types=subscription.event_types,
        dead_letter_target=dead_letter_target,
    )


async def _fetch_as_message(messages: Any) -> Any:
    """FastStream parser: one fetch as FastStream's batch message, built once per fetch with
    only what our handler reads (the nats-py messages).

    FastStream's own batch parser also matches every subject against the subscription's
    pattern, copies each message's headers and body into lists and draws a random correlation
    id; nothing reads them here (the settle policy works on the raw messages, ADR 0006), and on
    a quick consume path they were about a fifth of FastStream's cost per fetch (ADR 0055).
    The first message's JetStream reply subject is unique per delivery: it stands in for the
    ids. A coroutine function, so that FastStream does not run it in a worker thread.
    """
    from faststream.nats.message import NatsBatchMessage

    batch = messages if isinstance(messages, list) else [messages]
    first = batch[0].reply if batch else ""
    return NatsBatchMessage(
        raw_message=batch, body=b"", correlation_id=first or "empty", message_id=first
    )


async def _raw_messages(message: Any) -> Any:
    """FastStream decoder: the fetched nats-py messages themselves, undecoded.

    FastStream would json-decode the bodies before our handler runs; a body it cannot decode
    (100,000 levels deep, a 5,000-digit number) would then never reach the dead-letter policy,
    so :meth:`EventConsumer.process` parses the raw bytes (``parse_event``'s limits, ADR 0007).
    Handing the messages over as the body also spares the handler FastStream's ``message``
    injection, which resolves through a worker thread on every call (ADR 0035); and this is a
    coroutine function because FastStream runs a plain-function decoder in a worker thread too.
    """
    raw = message.raw_message
    return raw if isinstance(raw, list) else [raw]


@dataclass
class AttachedConsumer:
    """A consumer registered on a broker: FastStream's subscriber and the workers behind it."""

    consumer: EventConsumer
    subscriber: Any
    pool: SettlePool

    async def stop(self) -> None:
        """Stop settling (after the broker stopped fetching)."""
        await self.pool.stop()


def attach_consumer(
    broker: NatsBroker,
    consumer: EventConsumer,
    *,
    batch_size: int = 16,
    fetch_timeout: float = 1.0,
    concurrency: int = 1,
    inbox_prefix: str | None = None,
    progress_after: float | None = None,
) -> AttachedConsumer:
    """Register ``consumer``'s durable pull subscriber on ``broker`` (before ``broker.start()``).

    The stream is referenced, not declared (``ensure_jetstream`` owns declarations); the durable
    consumer is created from the spec if it does not exist yet. FastStream hands over each fetch
    at once (its per-message cost would otherwise cap a consumer at a few thousand messages a
    second) to a :class:`SettlePool` of ``concurrency`` workers. ``inbox_prefix`` is the
    service's own inbox (``_INBOX_<service>``), which pull requests' replies must use under
    restricted users. A message that waited for a worker longer than ``progress_after``
    seconds gets its ack wait restarted before it is handled (None: never). Dead letters go
    to the broker unless the consumer names a target.
    """
    from faststream import AckPolicy
    from faststream.nats import JStream, PullSub

    from arcflow.common.service.pull import make_steady

    if consumer.dead_letter_target is None:
        consumer.dead_letter_target = broker
    pool = SettlePool(consumer, concurrency, progress_after=progress_after)
    spec = consumer.spec

    async def on_fetch(messages: Any) -> None:
        await pool.submit(messages)

    on_fetch.__name__ = f"consume_{spec.durable.replace('-', '_')}"
    on_fetch.__doc__ = spec.description
    options: dict[str, Any] = {}
    if inbox_prefix:
        options["inbox_prefix"] = (inbox_prefix.rstrip(".") + ".").encode()
    subscriber = broker.subscriber(
        spec.filter_subject,
        stream=JStream(spec.stream, declare=False),
        durable=spec.durable,
        config=spec.to_config(),
        pull_sub=PullSub(batch_size=batch_size, timeout=fetch_timeout, batch=True),
        ack_policy=AckPolicy.MANUAL,
        parser=_fetch_as_message,
        decoder=_raw_messages,
        title=f"{spec.durable}:{spec.filter_subject}",
        description=spec.description or None,
        **options,
    )
    # a fetch loop that never spins, paced by the pool (at most one fetch waits for workers)
    make_steady(subscriber, gate=pool)
    return AttachedConsumer(consumer, subscriber(on_fetch), pool)


def attach_subscription(
    broker: NatsBroker,
    subscription: Subscription,
    state: Any,
    settings: Any,
    *,
    service: str,
    inbox_prefix: str,
    dead_letter_target: JetStreamContext | NatsBroker | None,
    fetch_timeout: float = 1.0,
) -> AttachedConsumer:
    """Register ``subscription`` on ``broker`` (before ``broker.start()``)."""
    consumer = build_consumer(
        subscription, state, settings, service=service, dead_letter_target=dead_letter_target
    )
    spec = consumer.spec
    return attach_consumer(
        broker,
        consumer,
        # a ``fetch_batch`` setting (ARCFLOW_<SERVICE>_FETCH_BATCH) overrides the declared batch
        batch_size=int(getattr(settings, "fetch_batch", subscription.batch)),
        fetch_timeout=fetch_timeout,
        concurrency=subscription.concurrency,
        inbox_prefix=inbox_prefix,
        # past this wait, the handler's deadline would outlast what is left of the ack wait
        progress_after=max(0.0, spec.ack_wait_seconds - deadline_of(subscription, settings, spec)),
    )
