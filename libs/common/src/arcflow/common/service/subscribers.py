"""A spec's subscriptions as FastStream subscribers (imported only when a spec has some).

Each :class:`~arcflow.common.service.spec.Subscription` becomes one durable JetStream pull
subscriber on the service's ``NatsBroker`` (ADR 0006):

* ``ack_policy=MANUAL``: FastStream never settles; the project's
  :class:`~arcflow.common.nats.EventConsumer` parses (with size/depth/integer limits), calls the
  typed handler and acks, naks with backoff or dead-letters;
* one FastStream call per fetch (``PullSub(batch=True)``), whose messages a pool of
  ``concurrency`` worker tasks settles (1: in stream order), so one slow message does not hold
  back the others fetched with it (:class:`SettlePool`);
* ``inbox_prefix``: the service's own inbox, which the NATS permissions rely on;
* a deadline per handler call: an overrunning call is abandoned (cancelled), logged and
  retried through the same nak/backoff path as any other failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.consume import Delivery, EventConsumer
from arcflow.common.tasks import cancel_and_wait

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

    from arcflow.common.events import EventBase
    from arcflow.common.nats.jetstream import ConsumerSpec
    from arcflow.common.service.spec import Subscription

#: Share of the consumer's ack wait a handler call may use before it is abandoned.
DEADLINE_SHARE_OF_ACK_WAIT = 0.8


class HandlerDeadlineExceededError(TimeoutError):
    """A handler call overran its deadline and was cancelled; the message will be retried."""


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
    deadline = deadline_of(subscription, settings, spec)
    handler = subscription.handler

    async def handle(event: EventBase, delivery: Delivery) -> None:
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                await handler(state, event, delivery)
        except TimeoutError:
            if not scope.expired():
                raise  # a timeout inside the handler (a client call), not our deadline
            raise HandlerDeadlineExceededError(
                f"handler overran its {deadline:g} s deadline and was abandoned"
            ) from None

    return EventConsumer(
        replace(spec),
        handle,
        service=service,
        event_types=subscription.event_types,
        dead_letter_target=dead_letter_target,
    )


class SettlePool:
    """Up to ``concurrency`` worker tasks that settle messages through ``consumer.process``.

    FastStream calls :meth:`submit` once per fetch. The messages are settled by the workers,
    outside FastStream's call: a handler that awaits I/O then suspends and resumes a short
    stack, not FastStream's middleware and dependency-injection frames once per message
    (ADR 0035). ``submit`` returns once the fetch is settled (``concurrency`` 1: the next fetch
    waits, as stream order requires) or once every message of it has a worker (more than 1:
    a slow message holds one worker, never the next fetch; ADR 0009). A worker ends when it
    finds nothing left to take, so an idle consumer holds no task.
    """

    def __init__(self, consumer: EventConsumer, concurrency: int = 1) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.consumer = consumer
        self.concurrency = concurrency
        self._queue: asyncio.Queue[Msg] = asyncio.Queue()
        self._taken = asyncio.Event()
        self._workers: set[asyncio.Task[None]] = set()

    async def submit(self, messages: list[Msg]) -> None:
        """Hand over one fetch; see the class for when this returns."""
        if not messages:
            return
        self._taken.clear()
        for msg in messages:
            self._queue.put_nowait(msg)
        self._workers = {w for w in self._workers if not w.done()}
        for _ in range(min(self.concurrency - len(self._workers), len(messages))):
            worker = asyncio.create_task(self._work(), name=f"settle {self.consumer.spec.durable}")
            self._workers.add(worker)
        try:
            if self.concurrency == 1:
                await self._queue.join()
            else:
                await self._taken.wait()
        except asyncio.CancelledError:
            if self.concurrency == 1:  # in order: the fetch is abandoned as a whole
                await self.stop()
            raise

    async def _work(self) -> None:
        while not self._queue.empty():
            msg = self._queue.get_nowait()
            if self._queue.empty():
                self._taken.set()
            try:
                await self.consumer.process(msg)  # never raises but CancelledError
            finally:
                self._queue.task_done()

    async def stop(self) -> None:
        """Cancel the workers and drop what is queued: never acked, so JetStream redelivers."""
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
        await cancel_and_wait(list(self._workers))
        self._workers.clear()


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
) -> AttachedConsumer:
    """Register ``consumer``'s durable pull subscriber on ``broker`` (before ``broker.start()``).

    The stream is referenced, not declared (``ensure_jetstream`` owns declarations); the durable
    consumer is created from the spec if it does not exist yet. FastStream hands over each fetch
    at once (its per-message cost would otherwise cap a consumer at a few thousand messages a
    second) to a :class:`SettlePool` of ``concurrency`` workers. ``inbox_prefix`` is the
    service's own inbox (``_INBOX_<service>``), which pull requests' replies must use under
    restricted users. Dead letters go to the broker unless the consumer names a target.
    """
    from faststream import AckPolicy
    from faststream.nats import JStream, PullSub

    from arcflow.common.service.pull import make_steady

    if consumer.dead_letter_target is None:
        consumer.dead_letter_target = broker
    pool = SettlePool(consumer, concurrency)
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
        decoder=_raw_messages,
        title=f"{spec.durable}:{spec.filter_subject}",
        description=spec.description or None,
        **options,
    )
    make_steady(subscriber)  # a fetch loop that never spins (arcflow.common.service.pull)
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
    return attach_consumer(
        broker,
        consumer,
        # a ``fetch_batch`` setting (ARCFLOW_<SERVICE>_FETCH_BATCH) overrides the declared batch
        batch_size=int(getattr(settings, "fetch_batch", subscription.batch)),
        fetch_timeout=fetch_timeout,
        concurrency=subscription.concurrency,
        inbox_prefix=inbox_prefix,
    )
