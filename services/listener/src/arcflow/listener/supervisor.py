"""Capped exponential backoff supervision (docs/upstream-behaviour.md#runner-variants).

With several scale sets each pump and each worker runs under :func:`supervise`: an error is
logged and the task restarts after 1 s, 2 s, 4 s ... capped at 2 min; a clean return (the
session ended without an error) resets the delay to the initial value. It returns only when
``stop`` is set, so a failing scale set never cancels its siblings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("arcflow.listener.supervisor")

Sleep = Callable[[float], Awaitable[None]]


class FatalError(Exception):
    """An error no restart can fix (bad configuration): ends the whole process."""


@dataclass(frozen=True)
class Backoff:
    initial: float = 1.0
    factor: float = 2.0
    cap: float = 120.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < 0 or self.factor < 1:
            raise ValueError("backoff needs initial >= 0, cap >= 0 and factor >= 1")

    def next(self, current: float) -> float:
        return min(max(current, self.initial) * self.factor, self.cap)


@dataclass
class SupervisorStats:
    """What happened to one supervised task (for tests and logs)."""

    starts: int = 0
    failures: int = 0
    clean_exits: int = 0
    delays: list[float] = field(default_factory=list)
    last_error: str = ""


async def _wait_or_stop(stop: asyncio.Event, delay: float, sleep: Sleep | None) -> None:
    if sleep is not None:
        await sleep(delay)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)


async def supervise(
    name: str,
    run: Callable[[asyncio.Event], Awaitable[None]],
    stop: asyncio.Event,
    *,
    backoff: Backoff | None = None,
    sleep: Sleep | None = None,
    stats: SupervisorStats | None = None,
) -> None:
    """Run ``run(stop)`` again and again until ``stop`` is set; never raises (but FatalError)."""
    policy = backoff or Backoff()
    record = stats if stats is not None else SupervisorStats()
    delay = policy.initial
    while not stop.is_set():
        record.starts += 1
        try:
            await run(stop)
        except FatalError:
            raise
        except Exception as exc:
            if stop.is_set():
                return
            record.failures += 1
            record.last_error = f"{type(exc).__name__}: {exc}"
            record.delays.append(delay)
            log.error(
                "%s failed; restarting in %.1fs: %s",
                name,
                delay,
                record.last_error,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            await _wait_or_stop(stop, delay, sleep)
            delay = policy.next(delay)
            continue
        if stop.is_set():
            return
        record.clean_exits += 1
        delay = policy.initial
        log.info("%s returned; restarting", name)
