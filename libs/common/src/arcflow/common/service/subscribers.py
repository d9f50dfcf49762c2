"""A spec's subscriptions as FastStream subscribers, by FastStream's public API only (ADR 0070).

Each :class:`~arcflow.common.service.spec.Subscription` becomes one durable JetStream pull
subscriber on the service's ``NatsBroker`` (``broker.subscriber(subject, stream=JStream(...,
declare=False), durable=..., config=..., pull_sub=PullSub(batch=True, ...),
ack_policy=AckPolicy.MANUAL, decoder=...)``): FastStream's own fetch loop makes one call per
fetch (up to ``batch`` messages, waiting at most the batch window). What arcflow adds goes
through FastStream's documented hooks and nats-py's public ``Msg`` API:

* ``decoder=``: for each message of the fetch, parses the raw bytes with
  :func:`~arcflow.common.events.parse_event` (its size, depth and integer limits) and applies
  the :class:`~arcflow.common.nats.consume.SettlePolicy` before any handler runs: a malformed or
  schema-invalid message is dead-lettered on its first delivery (ADR 0007) and termed, an event
  of a type the subscription does not declare is acked and skipped. The admitted events go on to
  the batch handler;
* the batch handler calls the subscription's typed ``handler(state, event, delivery)`` once per
  admitted event, inside the consumer span (the trace in the headers continued) and under the
  handler's deadline: in stream order with ``concurrency`` 1, else on up to ``concurrency``
  tasks at once;
* each message is settled on its own (``AckPolicy.MANUAL``: ``ack``, ``nak(delay=...)`` for a
  retry with backoff, ``term`` after a dead letter), so one failing event never holds back or
  repeats the batch's others. A message that waited in its batch restarts its ack wait
  (``in_progress``) before its handler starts, so JetStream never redelivers a message whose
  handler is within its deadline;
* ``inbox_prefix``: the service's own inbox, which the NATS permissions rely on.

nats-py is pinned (ADR 0070, docs/service-skeleton.md): newer releases raise a plain
``TimeoutError`` from a late fetch, which ends FastStream's batch loop without the fetch's
messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.consume import (
    DEADLINE_SHARE_OF_ACK_WAIT,
    Delivery,
    HandlerDeadlineExceededError,
    Outcome,
    SettlePolicy,
    delivery_of,
)

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

    from arcflow.common.events import EventBase
    from arcflow.common.nats.jetstream import ConsumerSpec
    from arcflow.common.service.spec import Subscription

__all__ = [
    "DEADLINE_SHARE_OF_ACK_WAIT",
    "DEFAULT_BATCH_WINDOW_SECONDS",
    "HandlerDeadlineExceededError",
    "attach_subscription",
    "deadline_of",
    "effective_consumer",
]

#: The message the decoder admitted and its delivery facts, for the handler call that follows
#: in the same task (FastStream's ``message`` context injection would resolve it through a
#: worker thread on every call).
_CURRENT: contextvars.ContextVar[tuple[float, list[tuple[Msg, Delivery, EventBase]]]] = (
    contextvars.ContextVar("arcflow_batch")
)

#: Longest a fetch waits to fill its batch (FastStream's ``PullSub.timeout``): an event that
#: arrives alone waits at most this long before its handler runs. It also sets how often an
#: idle subscriber fetches (two pull requests per window): 50 ms cost the registrar's and
#: reconciler's subscribers 20 times the idle CPU of 1 s (ADR 0070, benchmarks/idle_fetch.py),
#: and 250 ms were 1.7 NATS messages per scale set per minute in a settled 1,000-set fleet
#: (ADR 0122). No subscriber is on the job path; registration and scale set events are.
DEFAULT_BATCH_WINDOW_SECONDS = 1.0

log = logging.getLogger(__name__)


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


def attach_subscription(
    broker: NatsBroker,
    subscription: Subscription,
    state: Any,
    settings: Any,
    *,
    service: str,
    inbox_prefix: str | None = None,
    dead_letter_target: JetStreamContext | NatsBroker | None = None,
    fetch_timeout: float = 1.0,
    batch_window: float = DEFAULT_BATCH_WINDOW_SECONDS,
) -> Any:
    """Register ``subscription`` on ``broker`` (before ``broker.start()``); returns FastStream's
    subscriber. The stream is referenced, not declared (``ensure_jetstream`` owns declarations);
    the durable consumer is created from the spec if it does not exist yet. Dead letters go to
    ``dead_letter_target``, else through the broker. ``inbox_prefix`` is the service's own
    inbox (``_INBOX_<service>``), which pull requests' replies must use under restricted users
    (None: FastStream's default)."""
    from faststream import AckPolicy
    from faststream.nats import JStream, PullSub

    spec = effective_consumer(subscription, settings)
    policy = SettlePolicy(
        spec,
        service=service,
        event_types=subscription.event_types,
        dead_letter_target=dead_letter_target or broker,
    )
    seconds = deadline_of(subscription, settings, spec)
    handler = subscription.handler
    workers = subscription.concurrency
    # a ``fetch_batch`` setting (ARCFLOW_<SERVICE>_FETCH_BATCH) overrides the declared batch
    batch = int(getattr(settings, "fetch_batch", subscription.batch))
    # a message that waited this long in its batch restarts its ack wait before its handler
    # starts: past ``ack_wait - deadline`` a handler within its deadline could be redelivered
    refresh_after = max(0.0, spec.ack_wait_seconds - seconds) / 2
    durable = spec.durable

    async def settle(msg: Msg, delivery: Delivery, outcome: Outcome) -> None:
        try:
            if outcome is Outcome.ACKED or outcome is Outcome.SKIPPED:
                await msg.ack()
            elif outcome is Outcome.RETRY:
                await msg.nak(delay=policy.retry_delay(delivery))
            else:  # dead-lettered (or a dead letter dropped): term the original
                await msg.term()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the ack itself failed: JetStream redelivers after ack wait
            log.warning(
                "could not settle a message; it will be redelivered",
                extra={
                    "consumer": durable,
                    "subject": delivery.subject,
                    "outcome": str(outcome),
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )

    async def decode(message: Any) -> Any:
        """The batch's admitted events (parsed, policy applied); the rest settled here."""
        admitted: list[tuple[Msg, Delivery, EventBase]] = []
        for raw in message.raw_message:
            delivery = delivery_of(raw)
            result = await policy.admit(raw, delivery)
            if isinstance(result, Outcome):
                await settle(raw, delivery, result)
            else:
                admitted.append((raw, delivery, result))
        _CURRENT.set((asyncio.get_running_loop().time(), admitted))
        return admitted

    async def handle_one(raw: Msg, delivery: Delivery, event: EventBase, fetched: float) -> None:
        if asyncio.get_running_loop().time() - fetched > refresh_after:
            with contextlib.suppress(Exception):
                await raw.in_progress()
        outcome = Outcome.ACKED
        with policy.span(event, delivery):
            try:
                async with asyncio.timeout(seconds) as deadline:
                    await handler(state, event, delivery)
            except Exception as exc:
                if isinstance(exc, TimeoutError) and deadline.expired():
                    exc = HandlerDeadlineExceededError(
                        f"handler overran its {seconds:g} s deadline and was abandoned"
                    )
                try:
                    outcome = await policy.failed(raw, delivery, event, exc)
                except Exception:  # never lose the batch's other messages
                    log.exception("settle policy failed", extra={"consumer": durable})
                    outcome = Outcome.RETRY
        await settle(raw, delivery, outcome)

    async def on_batch(events: list[Any]) -> None:
        fetched, admitted = _CURRENT.get()
        if workers == 1 or len(admitted) <= 1:
            for raw, delivery, event in admitted:  # stream order
                await handle_one(raw, delivery, event, fetched)
            return
        pending = iter(admitted)

        async def worker() -> None:
            for raw, delivery, event in pending:
                await handle_one(raw, delivery, event, fetched)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(workers, len(admitted))):
                group.create_task(worker())

    on_batch.__name__ = f"on_{spec.durable.replace('-', '_')}"
    on_batch.__doc__ = spec.description or None

    options: dict[str, Any] = {}
    if inbox_prefix:
        options["inbox_prefix"] = (inbox_prefix.rstrip(".") + ".").encode()
    subscriber = broker.subscriber(
        spec.filter_subject,
        stream=JStream(spec.stream, declare=False),
        durable=spec.durable,
        config=spec.to_config(),
        pull_sub=PullSub(batch_size=batch, timeout=min(fetch_timeout, batch_window), batch=True),
        ack_policy=AckPolicy.MANUAL,
        decoder=decode,
        title=f"{spec.durable}:{spec.filter_subject}",
        description=spec.description or None,
        **options,
    )
    subscriber(on_batch)
    return subscriber
