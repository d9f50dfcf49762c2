"""Stopping background tasks so that a shutdown cannot hang.

A cancellation can be lost: Python 3.11's ``asyncio.wait_for`` returns the inner result when it
completes at the moment the outer task is cancelled, and nats-py's ``next_msg`` (under every
JetStream ``fetch``) turns a cancellation into ``ConnectionClosedError`` once the connection is
closed. A loop that survives such a cancellation keeps running, and a ``stop()`` that awaits it
once waits forever. ``cancel_and_wait`` re-cancels until each task has ended, within a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

log = logging.getLogger("arcflow.tasks")


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object] | None], *, grace: float = 10.0, interval: float = 0.2
) -> list[asyncio.Task[object]]:
    """Cancel ``tasks`` and wait until they end, cancelling again every ``interval`` seconds.

    Returns the tasks still running after ``grace`` seconds (logged as a warning) so callers
    can report them; an empty list means every task ended.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    pending = {task for task in tasks if task is not None and not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=interval)
        if pending and loop.time() >= deadline:
            log.warning(
                "tasks still running after %.1fs of cancellation",
                grace,
                extra={"tasks": sorted(task.get_name() for task in pending)},
            )
            break
    return list(pending)


def consume_results(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Retrieve finished tasks' exceptions so asyncio does not log them as never retrieved."""
    for task in tasks:
        if task.done() and not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()
