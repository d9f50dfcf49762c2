"""The watcher's NATS edges: publishing change events and keeping resume points.

Publishing retries until JetStream acknowledges (the caller waits, so the cache and the
watch's resourceVersion never move past an unpublished change). The event object is built
once and re-sent unchanged, so a publish that landed but whose ack was lost is dropped by
the server as a duplicate (same ``Nats-Msg-Id``) on retry.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue

from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats.jetstream import KV_WATCH
from arcflow.common.nats.publish import publish_event
from arcflow.watcher.changes import ResumePoint
from arcflow.watcher.metrics import WatcherMetrics

log = logging.getLogger(__name__)

#: Errors worth retrying: broker down/reconnecting, timeouts, JetStream API errors.
RETRYABLE_NATS_ERRORS = (nats.errors.Error, TimeoutError, OSError)


@dataclass
class Backoff:
    """Capped exponential delays: initial, doubled per failure, reset after a success."""

    initial: float
    maximum: float
    _next: float = 0.0

    def __post_init__(self) -> None:
        self._next = self.initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay

    def reset(self) -> None:
        self._next = self.initial


class EventPublisher:
    """Publishes change events to JetStream, retrying each until it is acknowledged."""

    def __init__(
        self,
        js: JetStreamContext,
        metrics: WatcherMetrics,
        *,
        timeout: float = 5.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 5.0,
    ) -> None:
        self._js = js
        self._metrics = metrics
        self._timeout = timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max

    async def publish(self, subject: str, event: K8sObjectChanged) -> bool:
        """Publish until acknowledged; returns whether the server called it a duplicate."""
        backoff = Backoff(self._backoff_initial, self._backoff_max)
        while True:
            try:
                ack = await publish_event(self._js, subject, event, timeout=self._timeout)
            except RETRYABLE_NATS_ERRORS as exc:
                self._metrics.publish_failed(event.resource)
                delay = backoff.next_delay()
                log.warning(
                    "publish failed, retrying",
                    extra={
                        "subject": subject,
                        "error": type(exc).__name__,
                        "retry_in_seconds": delay,
                    },
                )
                await asyncio.sleep(delay)
                continue
            return bool(ack is not None and ack.duplicate)


class ResumeStore:
    """Resume points in the watcher KV bucket (``arcflow_watch``), one key per scope."""

    def __init__(self, js: JetStreamContext, bucket: str = KV_WATCH.bucket) -> None:
        self._js = js
        self._bucket = bucket
        self._kv: KeyValue | None = None

    async def _bucket_handle(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._js.key_value(self._bucket)
        return self._kv

    async def load(self, key: str) -> ResumePoint | None:
        """The stored resume point, ``None`` if there is none or it is unreadable.

        Raises the NATS error when the broker cannot be asked (the caller retries).
        """
        try:
            entry = await (await self._bucket_handle()).get(key)
        except (KeyNotFoundError, KeyDeletedError):
            return None
        except BucketNotFoundError:
            self._kv = None
            raise
        if not entry.value:
            return None
        try:
            return ResumePoint.decode(entry.value)
        except ValueError as exc:
            log.warning("ignoring unreadable resume point", extra={"key": key, "reason": str(exc)})
            return None

    async def save(self, key: str, point: ResumePoint) -> None:
        """Store a resume point (raises the NATS error on failure; the caller retries)."""
        await (await self._bucket_handle()).put(key, point.encode())
