"""FastStream's JetStream pull subscribers, with a fetch loop that never spins (ADR 0006).

FastStream 0.7's pull loop suppresses ``ConnectionClosedError`` and fetches again at once.
nats-py raises that error without suspending, so on a closed connection the loop never yields
and the whole event loop stops (no health probe, no shutdown). Any other fetch error ends the
loop task silently. The subclasses below keep FastStream's behaviour for messages and replace
only the loop: a fetch error is logged once per streak and followed by a pause of one fetch
timeout, and a subscriber without workers handles a fetched batch one message at a time, in
stream order (FastStream starts them all at once, so ``concurrency=1`` would not mean one).
They are installed on the subscriber FastStream's factory built (same slots, only
``_consume_pull`` differs), as FastStream offers no option to choose the class.

A batch subscriber may also get a :class:`FetchGate` (the workers that settle its fetches):
before each fetch the loop waits until the gate has room and asks it how many messages to
fetch, so the pacing happens here and FastStream's call only hands a fetch over (ADR 0055).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, cast

import anyio
from faststream.nats.subscriber.usecases.stream_pull_subscriber import (
    BatchPullStreamSubscriber,
    ConcurrentPullStreamSubscriber,
    PullStreamSubscriber,
)
from nats.errors import TimeoutError as NatsTimeoutError

log = logging.getLogger(__name__)


class FetchGate(Protocol):
    """Who settles the fetched messages: says how many to fetch next, waiting for room."""

    async def room(self, batch: int) -> int: ...


async def _pull_forever(
    sub: PullStreamSubscriber | BatchPullStreamSubscriber,
    cb: Callable[[Any], Coroutine[Any, Any, Any]],
    *,
    as_batch: bool = False,
    gate: FetchGate | None = None,
) -> None:
    assert sub.subscription is not None
    failing = False
    while sub.running:
        size = sub.pull_sub.batch_size
        if gate is not None:
            size = await gate.room(size)
        try:
            messages = await sub.subscription.fetch(batch=size, timeout=sub.pull_sub.timeout)
        except (NatsTimeoutError, TimeoutError):
            continue  # nothing to fetch
        except Exception as exc:
            if not failing:
                log.warning(
                    "cannot fetch from %s (%s); retrying",
                    sub.subject.broker_address,
                    type(exc).__name__,
                    extra={"subject": sub.subject.broker_address, "error": type(exc).__name__},
                )
            failing = True
            await anyio.sleep(sub.pull_sub.timeout or 1.0)
            continue
        if failing:
            log.info("fetching again from %s", sub.subject.broker_address)
            failing = False
        if as_batch:  # one FastStream call for the whole fetch (whatever its size)
            if messages:
                await cb(messages)
            continue
        # In stream order: handled one at a time, or queued for the concurrent subscriber's
        # ``max_workers`` workers (its ``cb`` only puts the message on their queue).
        for msg in messages:
            await cb(msg)


class SteadyPullSubscriber(PullStreamSubscriber):
    """One message at a time, in stream order (FastStream would run a fetched batch at once)."""

    __slots__ = ()

    async def _consume_pull(self, cb: Callable[[Any], Coroutine[Any, Any, Any]]) -> None:
        await _pull_forever(self, cb)


class SteadyConcurrentPullSubscriber(ConcurrentPullStreamSubscriber):
    """``cb`` queues each message for the subscriber's ``max_workers`` workers."""

    __slots__ = ()

    async def _consume_pull(self, cb: Callable[[Any], Coroutine[Any, Any, Any]]) -> None:
        await _pull_forever(self, cb)


class SteadyBatchPullSubscriber(BatchPullStreamSubscriber):
    """One fetch, however many messages it returned, is one batch: FastStream's own loop
    keeps fetching until the batch is full or the timeout passes, delaying a lone event.
    With a ``fetch_gate``, each fetch waits for the gate's room and asks for what it allows."""

    __slots__ = ()

    #: Set per instance by :func:`make_steady` (FastStream's subscribers keep a ``__dict__``).
    fetch_gate: FetchGate | None = None

    async def _consume_pull(self) -> None:
        await _pull_forever(self, self.consume, as_batch=True, gate=self.fetch_gate)

    @functools.cached_property
    def _subscription_log_context(self) -> dict[str, str]:
        return super().get_log_context(None)

    def get_log_context(self, message: Any) -> dict[str, str]:
        """FastStream's log context for a fetch, the subscription's part built once: FastStream
        rebuilds the subject's address on every call (ADR 0055)."""
        return {
            **self._subscription_log_context,
            "message_id": getattr(message, "message_id", ""),
        }


def make_steady(subscriber: Any, gate: FetchGate | None = None) -> Any:
    """Install the steady fetch loop on a FastStream pull subscriber (others unchanged);
    ``gate`` paces a batch subscriber's fetches."""
    if type(subscriber) is BatchPullStreamSubscriber:
        subscriber.__class__ = SteadyBatchPullSubscriber
        if gate is not None:
            cast(SteadyBatchPullSubscriber, subscriber).fetch_gate = gate
        return subscriber
    if gate is not None:
        raise ValueError("a fetch gate paces batch subscribers only")
    if type(subscriber) is ConcurrentPullStreamSubscriber:
        subscriber.__class__ = SteadyConcurrentPullSubscriber
    elif type(subscriber) is PullStreamSubscriber:
        subscriber.__class__ = SteadyPullSubscriber
    return subscriber
