"""Memory the listener does not keep (ADR 0074: the listener's RSS target).

Formatting a traceback (a span recording an exception, a log line with ``exc_info``) reads the
*whole* source file of every frame into ``linecache``, which keeps it for the life of the
process: one failed NATS publish kept nats-py's client modules and OpenTelemetry's (240 KB of
source, about 0.6 MiB of RSS). Nothing in the listener reads source lines except to format the
next traceback, which reads them again. :func:`housekeeping` drops them every ``every``
seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import linecache

#: Seconds between two passes (and from the start of serving to the first).
HOUSEKEEPING_EVERY = 60.0


def forget_source_lines() -> None:
    """Drop the source files the traceback machinery cached (``linecache``)."""
    linecache.clearcache()


async def housekeeping(stop: asyncio.Event, *, every: float = HOUSEKEEPING_EVERY) -> None:
    """Until ``stop``: every ``every`` s, :func:`forget_source_lines`."""
    while not await _stopped(stop, every):
        forget_source_lines()


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
