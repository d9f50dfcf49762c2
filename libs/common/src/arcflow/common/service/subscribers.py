"""A spec's subscriptions as FastStream subscribers (imported only when a spec has some).

Each :class:`~arcflow.common.service.spec.Subscription` becomes one durable JetStream pull
subscriber on the service's ``NatsBroker`` (ADR 0006):

* ``ack_policy=MANUAL``: FastStream never settles; the project's
  :class:`~arcflow.common.nats.EventConsumer` parses (with size/depth/integer limits), calls the
  typed handler and acks, naks with backoff or dead-letters;
* ``max_workers=concurrency``: FastStream's concurrent pull subscriber, so one slow message
  does not hold back the others fetched with it;
* ``inbox_prefix``: the service's own inbox, which the NATS permissions rely on;
* a deadline per handler call: an overrunning call is abandoned (cancelled), logged and
  retried through the same nak/backoff path as any other failure.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.consume import Delivery, EventConsumer

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
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
) -> EventConsumer:
    """Register ``subscription`` on ``broker`` (before ``broker.start()``)."""
    consumer = build_consumer(
        subscription, state, settings, service=service, dead_letter_target=dead_letter_target
    )
    consumer.attach(
        broker,
        # a ``fetch_batch`` setting (ARCFLOW_<SERVICE>_FETCH_BATCH) overrides the declared batch
        batch_size=int(getattr(settings, "fetch_batch", subscription.batch)),
        fetch_timeout=fetch_timeout,
        max_workers=subscription.concurrency,
        inbox_prefix=inbox_prefix,
    )
    return consumer
