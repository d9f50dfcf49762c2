"""The one-subscription service both consumer test files run: ``handle`` as its handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.nats import NatsBroker

from arcflow.common.events import EVENT_REGISTRY, EventBase
from arcflow.common.nats import ConsumerSpec, Delivery
from arcflow.common.service import Subscription
from arcflow.common.service.subscribers import attach_subscription


def attach_consumer(
    broker: NatsBroker,
    spec: ConsumerSpec,
    handle: Callable[[EventBase, Delivery], Awaitable[None]],
    *,
    event_types: tuple[type[EventBase], ...] = tuple(EVENT_REGISTRY.values()),
    fetch_timeout: float = 1.0,
) -> None:
    """``handle`` as a one-subscription service's handler, on ``broker``."""

    async def handler(_state: object, event: EventBase, delivery: Delivery) -> None:
        await handle(event, delivery)

    subscription = Subscription(spec, event_types, handler)
    attach_subscription(
        broker, subscription, None, None, service="test", fetch_timeout=fetch_timeout
    )
