"""Polling helpers shared by the integration tests: wait for an outcome with a deadline.

Real servers answer asynchronously, so a test polls with a short interval and fails with the
last thing it saw rather than sleeping a fixed time and hoping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Awaitable[Any]],
    *,
    within: float = 10.0,
    interval: float = 0.05,
    what: str = "condition",
) -> Any:
    """Poll ``check`` until it returns something truthy and return that value.

    An ``AssertionError`` raised by ``check`` counts as "not yet"; on timeout the last one's
    text goes into the failure, so the test says what it last saw.
    """
    deadline = time.monotonic() + within
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value:
                return value
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {within}s: {last}")
        await asyncio.sleep(interval)


async def settled(count: Callable[[], int], *, quiet: float = 0.5, within: float = 10.0) -> int:
    """Wait until ``count()`` stops changing for ``quiet`` seconds: the work in flight is done.

    Asserting "nothing more happened" right after a first observation races with the rest of
    that same unit of work (a consumer still finishing its pass), so tests settle first.
    """
    deadline = time.monotonic() + within
    last, since = count(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"still changing after {within}s")
        await asyncio.sleep(0.05)
        current = count()
        if current != last:
            last, since = current, time.monotonic()
    return last
