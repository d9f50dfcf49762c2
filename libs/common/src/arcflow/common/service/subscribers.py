"""A spec's subscriptions as FastStream subscribers, by FastStream's public API only (ADR 0070).

Each :class:`~arcflow.common.service.spec.Subscription` becomes one durable JetStream pull
subscriber on the service's ``NatsBroker`` (``broker.subscriber(subject, stream=JStream(...,
declare=False), durable=..., config=..., pull_sub=PullSub(...), max_workers=...)``): FastStream's
own fetch loop, workers and acknowledgement. What arcflow adds goes through FastStream's
documented hooks:

* ``decoder=``: parses the raw bytes with :func:`~arcflow.common.events.parse_event` (its size,
  depth and integer limits) and applies the :class:`~arcflow.common.nats.consume.SettlePolicy`
  before any handler runs: a malformed or schema-invalid message is dead-lettered on its first
  delivery (ADR 0007) and rejected (``RejectMessage``: JetStream ``term``), an event of a type
  the subscription does not declare is acked and skipped (``AckMessage``);
* the handler is typed: FastStream validates the decoded event against the union of the
  subscription's ``event_types`` (pydantic, through its argument injection) and takes the
  delivery from its ``message`` context; it calls ``handler(state, event, delivery)`` inside
  the consumer span (the trace in the headers continued) and under the handler's deadline;
* ``ack_policy=AckPolicy.NACK_ON_ERROR``: FastStream acks after the handler returned. A handler
  failure is the policy's: ``NackMessage(delay=...)`` (retry with backoff) or, after a permanent
  failure or the last attempt, a dead letter and ``RejectMessage``;
* ``inbox_prefix``: the service's own inbox, which the NATS permissions rely on.

``concurrency`` is FastStream's ``max_workers`` (the fetch's messages wait in FastStream's queue
for a worker); with 1, a fetch is one message, handled in stream order. A message that waited
for a worker restarts its ack wait (``in_progress``) before its handler starts, so JetStream
never redelivers a message whose handler is within its deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import typing
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.consume import Delivery, Outcome, SettlePolicy, delivery_of

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.js import JetStreamContext

    from arcflow.common.nats.jetstream import ConsumerSpec
    from arcflow.common.service.spec import Subscription

__all__ = [
    "DEADLINE_SHARE_OF_ACK_WAIT",
    "HandlerDeadlineExceededError",
    "attach_subscription",
    "deadline_of",
    "effective_consumer",
]

#: The message the decoder admitted and its delivery facts, for the handler call that follows
#: in the same task (FastStream's ``message`` context injection would resolve it through a
#: worker thread on every call).
_CURRENT: contextvars.ContextVar[tuple[Any, Delivery]] = contextvars.ContextVar("arcflow_delivery")

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
) -> Any:
    """Register ``subscription`` on ``broker`` (before ``broker.start()``); returns FastStream's
    subscriber. The stream is referenced, not declared (``ensure_jetstream`` owns declarations);
    the durable consumer is created from the spec if it does not exist yet. Dead letters go to
    ``dead_letter_target``, else through the broker. ``inbox_prefix`` is the service's own
    inbox (``_INBOX_<service>``), which pull requests' replies must use under restricted users
    (None: FastStream's default)."""
    from faststream import AckPolicy
    from faststream.exceptions import AckMessage, NackMessage, RejectMessage
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
    batch = int(getattr(settings, "fetch_batch", subscription.batch)) if workers > 1 else 1

    def settle(outcome: Outcome, delay: float) -> BaseException:
        if outcome is Outcome.SKIPPED:
            return AckMessage()
        if outcome is Outcome.RETRY:
            return NackMessage(delay=delay)
        return RejectMessage()  # dead-lettered (or a dead letter dropped): term the original

    async def decode(message: Any) -> Any:
        raw = message.raw_message
        delivery = delivery_of(raw)
        admitted = await policy.admit(raw, delivery)
        if isinstance(admitted, Outcome):
            raise settle(admitted, policy.retry_delay(delivery))
        _CURRENT.set((message, delivery))
        return admitted

    async def on_event(event: Any) -> None:
        message, delivery = _CURRENT.get()
        raw = message.raw_message
        if workers > 1:
            await message.in_progress()  # the wait for a worker spent some of the ack wait
        outcome: Outcome | None = None
        with policy.span(event, delivery):
            try:
                async with asyncio.timeout(seconds) as deadline:
                    await handler(state, event, delivery)
            except Exception as exc:
                if isinstance(exc, TimeoutError) and deadline.expired():
                    exc = HandlerDeadlineExceededError(
                        f"handler overran its {seconds:g} s deadline and was abandoned"
                    )
                outcome = await policy.failed(raw, delivery, event, exc)
        if outcome is not None:
            raise settle(outcome, policy.retry_delay(delivery))

    # FastStream validates ``event`` against the declared classes (pydantic)
    event_union: Any = typing.Union[subscription.event_types]  # noqa: UP007 - built at run time
    on_event.__annotations__ = {"event": event_union, "return": None}
    on_event.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "event", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=event_union
            )
        ],
        return_annotation=None,
    )
    on_event.__name__ = f"on_{spec.durable.replace('-', '_')}"
    on_event.__doc__ = spec.description or None

    options: dict[str, Any] = {"max_workers": workers} if workers > 1 else {}
    if inbox_prefix:
        options["inbox_prefix"] = (inbox_prefix.rstrip(".") + ".").encode()
    subscriber = broker.subscriber(
        spec.filter_subject,
        stream=JStream(spec.stream, declare=False),
        durable=spec.durable,
        config=spec.to_config(),
        pull_sub=PullSub(batch_size=batch, timeout=fetch_timeout),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        decoder=decode,
        title=f"{spec.durable}:{spec.filter_subject}",
        description=spec.description or None,
        **options,
    )
    subscriber(on_event)
    return subscriber
