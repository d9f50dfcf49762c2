"""HTTP retry rules (docs/upstream-behaviour.md#actions-errors), as pure functions plus a policy
object.

The schedule is the upstream one (exponential 1-2-4-8 s capped at 30 s, ``Retry-After`` on 429
and 503 overriding it uncapped). ``sleep`` is injectable so tests against a local server can
retry without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

NOT_IMPLEMENTED = 501
RETRY_AFTER_STATUSES = frozenset({429, 503})
NEVER_RETRIED = frozenset({401, 403, 409})

Sleep = Callable[[float], Awaitable[None]]

#: The caller's deadline (``loop.time()`` seconds) of the request being served, if it has one.
_DEADLINE: ContextVar[float | None] = ContextVar("arcflow_actions_deadline", default=None)


@contextlib.contextmanager
def retry_deadline(deadline: float | None) -> Iterator[None]:
    """Within this block no retry starts whose wait would end at or after ``deadline``
    (``asyncio`` loop time): the request gives up at once instead, so an answer, even a
    failure, reaches a caller that waits only until then (ADR 0044)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def out_of_time(wait: float) -> bool:
    """Whether waiting ``wait`` seconds before a retry would pass the caller's deadline."""
    deadline = _DEADLINE.get()
    return deadline is not None and asyncio.get_running_loop().time() + wait >= deadline


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date), else ``None``."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, delta)


def is_retryable_status(status: int, extra: frozenset[int] = frozenset()) -> bool:
    """429, and every 5xx except 501; plus ``extra`` (401/403 on runner-registration only)."""
    if status in extra:
        return True
    return status == 429 or (status >= 500 and status != NOT_IMPLEMENTED)


def _has_cert_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def is_retryable_error(exc: BaseException) -> bool:
    """Transport failures are retried, except configuration errors that cannot heal by retrying:
    bad URL or scheme, and TLS certificate verification failures."""
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL | httpx.LocalProtocolError):
        return False
    if not isinstance(exc, httpx.TransportError):
        return False
    return not _has_cert_error(exc)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long to retry one HTTP request.

    ``max_retries`` = 4 means at most 5 attempts. ``backoff_min * 2**attempt``, capped at
    ``backoff_max``; a ``Retry-After`` on 429/503 replaces it and is not capped.
    """

    max_retries: int = 4
    backoff_min: float = 1.0
    backoff_max: float = 30.0
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff_min < 0 or self.backoff_max < 0:
            raise ValueError("backoff durations must be >= 0")

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def backoff(self, attempt: int) -> float:
        """Wait after failed attempt number ``attempt`` (0-based) without a Retry-After."""
        return float(min(self.backoff_min * (2**attempt), self.backoff_max))

    def wait_for(
        self,
        attempt: int,
        *,
        status: int | None = None,
        retry_after: str | None = None,
        now: datetime | None = None,
    ) -> float:
        """Wait after failed attempt ``attempt`` given the response status and Retry-After."""
        if status in RETRY_AFTER_STATUSES:
            honoured = parse_retry_after(retry_after, now=now)
            if honoured is not None:
                return honoured
        return self.backoff(attempt)

    def schedule(self) -> list[float]:
        """The waits between all attempts when no Retry-After is given: [1, 2, 4, 8] by default."""
        return [self.backoff(i) for i in range(self.max_retries)]

    @classmethod
    def fast(cls, max_retries: int = 4) -> RetryPolicy:
        """Same attempt count, no waiting: for tests against local servers."""
        return cls(max_retries=max_retries, backoff_min=0.0, backoff_max=0.0, sleep=_no_sleep)


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)
