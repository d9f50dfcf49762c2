"""Remembered message sessions: scale set id -> session id, in a NATS KV bucket (ADR 0015).

A listener killed with SIGKILL cannot delete its GitHub message sessions; its successor then
got 409 ``RunnerScaleSetSessionConflictException`` until GitHub expired them (43-65 s measured,
issue 14). So each pump records its open session here, and a pump starting on the same host
(the listener pod's deterministic name: a restarted container or a recreated pod) deletes the
session its predecessor left before creating its own. A record of another host is left alone:
that listener may still be alive, and deleting its live session would only start a tug of war;
the create then waits for the conflict to clear (upstream's retry budget in single-set mode).

Only the listener identity may write the bucket (``listener_permissions``). A record holds the
session id, the GitHub session owner name and the host: no token.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import asdict, dataclass

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from arcflow.common.nats.jetstream import KvBucketSpec, ensure_bucket

log = logging.getLogger("arcflow.listener.sessions")

SESSIONS_BUCKET = KvBucketSpec(
    "arcflow_listener_sessions",
    "GitHub message session per scale set id, for a restarted listener to delete (listener-owned)",
)


@dataclass(frozen=True)
class SessionRecord:
    session_id: str
    owner: str
    host: str

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> SessionRecord | None:
        try:
            raw = json.loads(data or b"")
            return cls(str(raw["session_id"]), str(raw.get("owner", "")), str(raw.get("host", "")))
        except (ValueError, TypeError, KeyError):
            return None


def _key(scale_set_id: int) -> str:
    return str(scale_set_id)


class SessionStore:
    """The bucket, or nothing (``kv=None``: tests and a NATS without the bucket)."""

    def __init__(self, kv: KeyValue | None) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> SessionStore:
        await ensure_bucket(js, SESSIONS_BUCKET)
        return cls(await js.key_value(SESSIONS_BUCKET.bucket))

    async def get(self, scale_set_id: int) -> SessionRecord | None:
        if self._kv is None:
            return None
        try:
            entry = await self._kv.get(_key(scale_set_id))
        except nats.js.errors.KeyNotFoundError:  # also KeyDeletedError
            return None
        return SessionRecord.decode(entry.value)

    async def records(self) -> dict[int, SessionRecord]:
        """Every readable record by scale set id (for diagnostics, tests and benchmarks)."""
        if self._kv is None:
            return {}
        try:
            keys = await self._kv.keys()
        except nats.js.errors.NoKeysError:
            return {}
        found = {}
        for key in filter(str.isdigit, keys):
            record = await self.get(int(key))
            if record is not None:
                found[int(key)] = record
        return found

    async def remember(self, scale_set_id: int, record: SessionRecord) -> None:
        if self._kv is not None:
            await self._kv.put(_key(scale_set_id), record.encode())

    async def forget(self, scale_set_id: int, session_id: str) -> None:
        """Delete the record if it still names ``session_id`` (a successor's stays)."""
        if self._kv is None:
            return
        try:
            entry = await self._kv.get(_key(scale_set_id))
        except nats.js.errors.KeyNotFoundError:
            return
        record = SessionRecord.decode(entry.value)
        if record is not None and record.session_id == session_id:
            with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):
                await self._kv.delete(_key(scale_set_id), last=entry.revision)
