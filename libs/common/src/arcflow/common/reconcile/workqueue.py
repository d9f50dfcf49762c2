"""A work queue of object keys: per-key serialisation, bounded concurrency, backoff retries.

Events only *enqueue* a key; a worker later reconciles it from current state. A key that is
added again while it waits is stored once (events coalesce, :attr:`WorkQueue.coalesced`
counts them); a key added while it is being reconciled is reconciled once more afterwards,
never twice at the same time. A failing key is retried with per-key exponential backoff; a
key that succeeds has its backoff reset. A :class:`~arcflow.common.errors.TerminalError`
drops the key until it is added again (retrying the same input cannot help). A pass that
outlives ``deadline_seconds`` is cancelled and retried like a failure.

:meth:`WorkQueue.add_settled` queues a key a little later, so that the changes in between
coalesce into one pass (a set whose hundreds of runners each move through their phases); until
it fires the key counts as busy, like a queued one.

Waiting keys are taken by ``priorities[key.kind]`` (lower first, default 0), then in the
order they came. ``caps[kind]`` bounds the passes of one kind running at once within the
shared workers: a key of a kind at its cap waits (parked, still coalescing) until a pass of
that kind ends, and the workers take the other kinds meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from arcflow.common.errors import is_terminal
from arcflow.common.reconcile.keys import Key, Result
from arcflow.common.tasks import cancel_and_wait
from arcflow.common.telemetry import redact_text

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Key[Any])


def backoff_delay(failures: int, base: float, cap: float) -> float:
    """``base * 2**(failures-1)`` capped at ``cap`` (pure, for the retry schedule)."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * (2 ** min(failures - 1, 30))))


class WorkQueue(Generic[K]):
    """Run ``reconcile`` for queued keys with at most ``workers`` running at once."""

    def __init__(
        self,
        reconcile: Callable[[K], Awaitable[Result]],
        *,
        workers: int = 4,
        retry_base_seconds: float = 0.05,
        retry_cap_seconds: float = 30.0,
        priorities: Mapping[str, int] | None = None,
        caps: Mapping[str, int] | None = None,
        deadline_seconds: float | None = None,
        on_error: Callable[[K, BaseException], None] | None = None,
        name: str = "reconcile",
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._reconcile = reconcile
        self._workers = workers
        self._retry_base = retry_base_seconds
        self._retry_cap = retry_cap_seconds
        self._priorities = dict(priorities or {})
        self._caps = dict(caps or {})
        if any(cap < 1 for cap in self._caps.values()):
            raise ValueError("a kind's cap must be >= 1")
        self._running: collections.Counter[str] = collections.Counter()  # passes per kind
        #: kind -> keys taken while the kind was at its cap, in the order they were taken.
        self._parked: dict[str, collections.deque[tuple[int, int, K]]] = {}
        self._deadline = deadline_seconds
        self._on_error = on_error
        self._name = name
        self._ready: asyncio.PriorityQueue[tuple[int, int, K]] = asyncio.PriorityQueue()
        self._added = 0  # FIFO order within a priority
        self._queued: set[K] = set()  # in _ready, not yet taken
        self._active: set[K] = set()  # being reconciled now
        self._dirty: set[K] = set()  # added while active: run again afterwards
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._settling: set[K] = set()  # on a timer of add_settled: busy, not yet queued
        self._tasks: list[asyncio.Task[None]] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False  # stop() was called: no worker takes another key
        self._pass_done = asyncio.Event()  # set whenever a pass ends (the drain waits on it)
        #: Passes that returned (not raised).
        self.processed = 0
        #: Adds that found the key already waiting (or already due again): no pass of their own.
        self.coalesced = 0

    # --- adding -------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue ``key`` now (coalesced with a pending add; re-run if it is in flight)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._settling.discard(key)
        if key in self._active:
            if key in self._dirty:
                self.coalesced += 1
            self._dirty.add(key)
            return
        if key in self._queued:
            self.coalesced += 1
            return
        self._queued.add(key)
        self._idle.clear()
        self._added += 1
        self._ready.put_nowait((self._priorities.get(key.kind, 0), self._added, key))

    def add_after(self, key: K, seconds: float) -> None:
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

    def add_settled(self, key: K, seconds: float) -> None:
        """Queue ``key`` ``seconds`` from the first such add: later adds until then coalesce
        into that one (a key already queued, or due sooner, stays as it is). Until it fires
        the key counts as busy (:meth:`is_busy`): a change is waiting for its pass."""
        if seconds <= 0 or key in self._queued:
            self.add(key)
            return
        if key in self._settling:
            self.coalesced += 1
            return
        self.add_after(key, seconds)  # always leaves a timer: this one, or one due sooner
        self._settling.add(key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    # --- running ------------------------------------------------------------------------

    def start(self) -> None:
        for index in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"{self._name}-{index}"))

    async def stop(self, drain_seconds: float = 0.0) -> None:
        """Stop: no key is taken any more and retry timers are dropped; the passes in flight
        may finish within ``drain_seconds`` (a SIGTERM inside the pod's grace period), then
        whatever still runs is cancelled. Keys not reconciled are picked up by the next
        process from its cache (level-triggered: nothing is lost)."""
        self._stopping = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._settling.clear()
        deadline = time.monotonic() + drain_seconds
        if self._active and drain_seconds > 0:
            log.info(
                "draining reconcile passes in flight",
                extra={"passes": len(self._active), "drain_seconds": drain_seconds},
            )
        while True:
            self._pass_done.clear()  # then look, with no await in between
            remaining = deadline - time.monotonic()
            if not self._active or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pass_done.wait(), remaining)
        if self._active:
            log.warning(
                "reconcile passes still running at the drain deadline: cancelled",
                extra={"passes": len(self._active), "keys": sorted(map(str, self._active))[:10]},
            )
        await cancel_and_wait(self._tasks)
        self._tasks.clear()

    @property
    def pending(self) -> int:
        return len(self._queued) + len(self._active) + len(self._timers)

    def is_waiting(self, key: K) -> bool:
        """``key`` is queued, due again after its pass, or on a retry timer."""
        return key in self._queued or key in self._dirty or key in self._timers

    def is_busy(self, key: K) -> bool:
        """``key`` is queued, being reconciled, due again after the pass in flight, or on an
        :meth:`add_settled` timer; a timer of ``add_after`` (a look again later, a retry's
        backoff) does not count. Once an
        add of ``key`` happened, this turning false says a pass that started after it has
        ended (tests check "nothing happened" only then)."""
        return (
            key in self._queued
            or key in self._active
            or key in self._dirty
            or key in self._settling
        )

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
        while not self._stopping:
            entry = await self._ready.get()
            key = entry[2]
            cap = self._caps.get(key.kind)
            if cap is not None and self._running[key.kind] >= cap:
                self._parked.setdefault(key.kind, collections.deque()).append(entry)
                continue  # still queued: it runs when a pass of its kind ends
            self._queued.discard(key)
            self._active.add(key)
            self._running[key.kind] += 1
            try:
                result = await self._run_one(key)
            finally:
                self._active.discard(key)
                self._running[key.kind] -= 1
                parked = self._parked.get(key.kind)
                if parked:
                    self._ready.put_nowait(parked.popleft())
                self._pass_done.set()
            if self._stopping:
                return  # draining: this worker is done
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif result.requeue_after is not None:
                self.add_after(key, result.requeue_after)
            if not self.pending:
                self._idle.set()

    async def _call(self, key: K) -> Result:
        if self._deadline is None:
            return await self._reconcile(key)
        async with asyncio.timeout(self._deadline):
            return await self._reconcile(key)

    async def _run_one(self, key: K) -> Result:
        try:
            result = await self._call(key)
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
