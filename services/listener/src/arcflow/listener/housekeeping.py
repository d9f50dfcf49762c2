"""Memory the listener does not keep (ADR 0074: the listener's RSS target).

Two things a long-running listener process would otherwise hold for nothing:

- **Source lines.** Formatting a traceback (a span recording an exception, a log line with
  ``exc_info``) reads the *whole* source file of every frame into ``linecache`` and keeps it
  for the life of the process: one failed NATS publish kept nats-py's client modules and
  OpenTelemetry's (240 KB of source, about 0.6 MiB of RSS). Nothing in the listener reads
  source lines except to format the next traceback, which reads them again.
  :func:`forget_source_lines` drops them; :func:`housekeeping` does so every
  ``every`` seconds.
- **Start-up objects in the collector's generations.** Once every scale set is being
  served, :func:`freeze_start_up` collects once and moves what survived (modules, classes,
  pydantic validators, the config) to the collector's permanent generation (``gc.freeze``):
  later collections no longer walk them. What start-up left that later becomes cyclic
  garbage is not collected (none is expected: these objects live as long as the process).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import linecache
import logging

log = logging.getLogger("arcflow.listener")

#: Seconds between two passes (and from the start of serving to the first).
HOUSEKEEPING_EVERY = 60.0
#: Seconds after serving starts at which start-up objects are frozen.
FREEZE_AFTER = 5.0


def forget_source_lines() -> None:
    """Drop the source files the traceback machinery cached (``linecache``)."""
    linecache.clearcache()


def freeze_start_up() -> None:
    """Collect once, then keep what survived out of later collections (``gc.freeze``)."""
    gc.collect()
    gc.freeze()


async def housekeeping(
    stop: asyncio.Event,
    *,
    every: float = HOUSEKEEPING_EVERY,
    freeze_after: float | None = FREEZE_AFTER,
) -> None:
    """Until ``stop``: once ``freeze_after`` s in, :func:`freeze_start_up` (None: never);
    every ``every`` s, :func:`forget_source_lines`."""
    if freeze_after is not None:
        if await _stopped(stop, freeze_after):
            return
        forget_source_lines()
        freeze_start_up()
        log.debug("start-up objects frozen: %d", gc.get_freeze_count())
    while not await _stopped(stop, every):
        forget_source_lines()


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
