"""A work queue of object keys: per-key serialisation, bounded concurrency, backoff retries.

Events only *enqueue* a key; a worker later reconciles it from current state. A key that is
added again while it waits is stored once (events coalesce); a key added while it is being
reconciled is reconciled once more afterwards, never twice at the same time. A failing key is
retried with per-key exponential backoff; a key that succeeds has its backoff reset.

Waiting keys are taken by kind, then in the order they came: listeners first, then
AutoscalingRunnerSets, then runner sets, then single runners. A burst queues hundreds of runner
keys; a listener pod that died meanwhile must not wait behind them, since no job is scaled for
until it is back (docs/reconciler.md). Listeners go ahead of ARSs too: 100 ARSs applied at once
re-queue their ARS keys at every change of their runner sets, and a listener key behind them
waited up to a minute before its pod was made (ADR 0040).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from arcflow.common.errors import is_terminal
from arcflow.common.tasks import cancel_and_wait
from arcflow.common.telemetry import redact_text
from arcflow.reconciler.keys import PRIORITY, Key, Result

log = logging.getLogger(__name__)


Reconcile = Callable[[Key], Awaitable[Result]]


def backoff_delay(failures: int, base: float, cap: float) -> float:
    """``base * 2**(failures-1)`` capped at ``cap`` (pure, for the retry schedule)."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * (2 ** min(failures - 1, 30))))


class WorkQueue:
    """Run ``reconcile`` for queued keys with at most ``workers`` running at once."""

    def __init__(
        self,
        reconcile: Reconcile,
        *,
        workers: int = 4,
        retry_base_seconds: float = 0.05,
        retry_cap_seconds: float = 30.0,
        on_error: Callable[[Key, BaseException], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._reconcile = reconcile
        self._workers = workers
        self._retry_base = retry_base_seconds
        self._retry_cap = retry_cap_seconds
        self._on_error = on_error
        self._ready: asyncio.PriorityQueue[tuple[int, int, Key]] = asyncio.PriorityQueue()
        self._added = 0  # FIFO order within a priority
        self._queued: set[Key] = set()  # in _ready, not yet taken
        self._active: set[Key] = set()  # being reconciled now
        self._dirty: set[Key] = set()  # added while active: run again afterwards
        self._failures: dict[Key, int] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self.processed = 0

    # --- adding -------------------------------------------------------------------------

    def add(self, key: Key) -> None:
        """Queue ``key`` now (coalesced with a pending add; re-run if it is in flight)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._idle.clear()
        self._added += 1
        self._ready.put_nowait((PRIORITY[key.kind], self._added, key))

    def add_after(self, key: Key, seconds: float) -> None:
        """Queue ``key`` after ``seconds`` (an earlier pending timer for the key wins)."""
        if seconds <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        due = loop.time() + seconds
        if existing is not None and existing.when() <= due:
            return
        if existing is not None:
            existing.cancel()
        self._idle.clear()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    # --- running ------------------------------------------------------------------------

    def start(self) -> None:
        for index in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"reconcile-{index}"))

    async def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    @property
    def pending(self) -> int:
        return len(self._queued) + len(self._active) + len(self._timers)

    async def wait_idle(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Wait until nothing is queued, running or scheduled (tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while self.pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"work queue still busy: {self.pending} key(s)")
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), min(remaining, 0.05))

    async def _worker(self) -> None:
        while True:
            _priority, _order, key = await self._ready.get()
            self._queued.discard(key)
            self._active.add(key)
            try:
                result = await self._run_one(key)
            finally:
                self._active.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif result.requeue_after is not None:
                self.add_after(key, result.requeue_after)
            if not self.pending:
                self._idle.set()

    async def _run_one(self, key: Key) -> Result:
        try:
            result = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_terminal(exc):
                # Retrying cannot help (a terminal error): drop the key until an event about
                # it arrives; say so once.
                self._failures.pop(key, None)
                if self._on_error is not None:
                    self._on_error(key, exc)
                log.error(
                    "reconcile failed for good; waiting for a change",
                    extra={"key": str(key), "error": redact_text(f"{type(exc).__name__}: {exc}")},
                )
                return Result.done()
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = backoff_delay(failures, self._retry_base, self._retry_cap)
            if self._on_error is not None:
                self._on_error(key, exc)
            log.warning(
                "reconcile failed; retrying",
                extra={
                    "key": str(key),
                    "error": redact_text(f"{type(exc).__name__}: {exc}"),
                    "failures": failures,
                    "retry_in_seconds": delay,
                },
            )
            return Result.again(delay)
        self.processed += 1
        self._failures.pop(key, None)
        return result
