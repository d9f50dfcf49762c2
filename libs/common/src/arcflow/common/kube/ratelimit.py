"""A client-side token bucket, so a burst of reconciles cannot flood the API server.

Same model as client-go's default limiter: ``burst`` tokens, refilled at ``qps`` per second;
each request takes one token, waiting when the bucket is empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """Async token bucket; ``acquire()`` waits until a token is available."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be > 0, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    def try_acquire(self) -> float:
        """Take a token if one is there and return 0; else return the seconds to wait."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.qps

    async def acquire(self) -> None:
        """Wait for and take one token (fair: waiters are served in order)."""
        async with self._lock:
            delay = self.try_acquire()
            while delay > 0:
                await asyncio.sleep(delay)
                delay = self.try_acquire()
