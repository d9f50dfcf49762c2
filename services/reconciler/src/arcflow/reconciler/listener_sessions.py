"""Which scale sets have an open listener message session: the listener's
``arcflow_listener_sessions`` KV bucket, read-only (ADR 0015 for the bucket, ADR 0073 for why
the reconciler reads it).

The listener writes a scale set's key when its session opens and deletes it when the session
closes cleanly; a pump on the same host deletes its predecessor's key before it creates a new
session, so a refused create leaves no key behind. A key is therefore the current "a session is
open" of that scale set, whatever the reconciler remembers of the listener's events. The
record's value (session id, owner, host) is not kept: only whether the key exists.

Read only when the ``ListenerSessionsOpen`` condition needs it (a failure reported or the
condition False): a healthy set costs no read. The bucket is opened on first use, so a
reconciler that starts before any listener created it still starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from arcflow.common.nats.permissions import LISTENER_SESSIONS_BUCKET

log = logging.getLogger(__name__)

#: After a failed read (no grant, NATS away), passes do not wait on the bucket for this long.
UNREADABLE_BACKOFF_SECONDS = 60.0


class ListenerSessions:
    """The bucket through the reconciler's read-only grant (``reconciler_permissions``)."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._kv: KeyValue | None = None
        self._unreadable_until = 0.0

    async def _bucket(self) -> KeyValue | None:
        if self._kv is None:
            try:
                self._kv = await self._js.key_value(LISTENER_SESSIONS_BUCKET)
            except nats.js.errors.BucketNotFoundError:
                return None  # no listener ever ran: no session is open
        return self._kv

    async def open_among(self, scale_set_ids: Iterable[int]) -> set[int] | None:
        """The ids among ``scale_set_ids`` with an open session, read together (one round
        trip of latency); ``None`` when the bucket cannot be read (logged, no value)."""
        ids = sorted({i for i in scale_set_ids if i > 0})
        if time.monotonic() < self._unreadable_until:
            return None
        try:
            kv = await self._bucket()
            if kv is None:
                return set()
            found = await asyncio.gather(*(self._exists(kv, i) for i in ids))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._unreadable_until = time.monotonic() + UNREADABLE_BACKOFF_SECONDS
            log.warning(
                "listener sessions bucket unreadable (%s); the sessions condition follows the "
                "listener's events alone for %.0f s",
                type(exc).__name__,
                UNREADABLE_BACKOFF_SECONDS,
            )
            return None
        return {i for i, there in zip(ids, found, strict=True) if there}

    @staticmethod
    async def _exists(kv: KeyValue, scale_set_id: int) -> bool:
        try:
            await kv.get(str(scale_set_id))
        except nats.js.errors.KeyNotFoundError:  # also KeyDeletedError
            return False
        return True
