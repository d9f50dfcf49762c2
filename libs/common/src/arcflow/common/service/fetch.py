"""The light JetStream pull loop, for a process that does not run FastStream.

This is the one place where arcflow fetches from JetStream itself. The services' subscriptions
are fetched by FastStream's own pull loop (``subscribers.py``, ADR 0070); the listener stays
light (ADR 0016: no FastStream in its process, plain nats-py), so its workers pull with this
loop instead: bind to the durable, fetch in stream order until asked to stop, and end as soon
as a task that runs beside the loop (the listener's statistics ticks) fails. The messages are
settled by :class:`~arcflow.common.nats.consume.EventConsumer`: the services' settle policy and
handler deadline (ADR 0070, ADR 0081).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext

from arcflow.common.nats.jetstream import ConsumerSpec


async def bind_pull(js: JetStreamContext, spec: ConsumerSpec) -> JetStreamContext.PullSubscription:
    """A pull subscription on ``spec``'s existing durable (the caller declared it)."""
    return await js.pull_subscribe_bind(durable=spec.durable, stream=spec.stream)


async def fetch_batches(
    subscription: JetStreamContext.PullSubscription,
    *,
    batch: int,
    wait_seconds: float,
    stop: asyncio.Event,
    beside: asyncio.Future[Any] | None = None,
) -> AsyncGenerator[list[Msg], None]:
    """Each non-empty fetch of up to ``batch`` messages, in stream order, until ``stop`` is
    set; each fetch waits up to ``wait_seconds``. When ``beside`` ends first, its exception
    ends the loop (a normal end stops it too). A fetch in flight when the loop ends is
    cancelled: its messages stay unacknowledged and JetStream delivers them again. Use with
    ``contextlib.aclosing``."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            fetch = asyncio.ensure_future(subscription.fetch(batch, timeout=wait_seconds))
            waiting: set[asyncio.Future[Any]] = {fetch, stopper}
            if beside is not None:
                waiting.add(beside)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if beside is not None and beside.done():
                fetch.cancel()
                beside.result()
            if not fetch.done():
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetch
                return
            try:
                messages = fetch.result()
            except TimeoutError:  # nats.errors.TimeoutError, or asyncio's from inside fetch
                continue
            if messages:
                yield messages
    finally:
        stopper.cancel()
