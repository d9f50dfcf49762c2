"""Capped exponential backoff supervision (docs/upstream-behaviour.md#runner-variants).

With several scale sets each pump and each worker runs under :func:`supervise`: an error is
logged and the task restarts after 1 s, 2 s, 4 s, capped at 5 s, each delay shortened by up
to a quarter at random (jitter, so many sets failing at once do not retry in step). A clean
return (the session ended without an error) resets the delay to the initial value, and so
does a failure after the run made progress (``progress``: a session that polled
successfully), so a fault on a healthy session is retried after 1 s, not after the delay a
fault long ago left behind (ADR 0044). It returns only when ``stop`` is set, so a failing scale
set never cancels its siblings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
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
    #: Short: every attempt of a pump already includes its HTTP client's own retries (1-8 s
    #: apart, ``Retry-After`` honoured), so the supervisor adds little pressure (ADR 0044).
    cap: float = 5.0
    #: Each wait is shortened by up to this fraction at random (0: exact delays).
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < 0 or self.factor < 1:
            raise ValueError("backoff needs initial >= 0, cap >= 0 and factor >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("backoff jitter must be in [0, 1)")

    def next(self, current: float) -> float:
        return min(max(current, self.initial) * self.factor, self.cap)

    def wait(self, delay: float, draw: Callable[[], float] = random.random) -> float:
        """The wait for ``delay``: within ``[delay * (1 - jitter), delay]``, never longer."""
        return delay * (1.0 - self.jitter * draw())


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
    progress: Callable[[], int] | None = None,
) -> None:
    """Run ``run(stop)`` again and again until ``stop`` is set; never raises (but FatalError).

    ``progress`` counts what the task achieved (a pump's successful polls): when it moved
    during a run that then failed, the delay starts again from ``backoff.initial``."""
    policy = backoff or Backoff()
    record = stats if stats is not None else SupervisorStats()
    delay = policy.initial
    while not stop.is_set():
        record.starts += 1
        before = progress() if progress is not None else 0
        try:
            await run(stop)
        except FatalError:
            raise
        except Exception as exc:
            if stop.is_set():
                return
            record.failures += 1
            record.last_error = f"{type(exc).__name__}: {exc}"
            if progress is not None and progress() != before:
                delay = policy.initial  # it worked until now: a fresh fault, not a repeat
            wait = policy.wait(delay)
            record.delays.append(wait)
            log.error(
                "%s failed; restarting in %.1fs: %s",
                name,
                wait,
                record.last_error,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            await _wait_or_stop(stop, wait, sleep)
            delay = policy.next(delay)
            continue
        if stop.is_set():
            return
        record.clean_exits += 1
        delay = policy.initial
        log.info("%s returned; restarting", name)
