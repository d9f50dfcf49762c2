"""Reading the registrar's scale set ids from the ``arcflow_scalesets`` KV bucket.

The registrar owns the bucket. Key encoding and record JSON are the shared contract in
:mod:`arcflow.common.scaleset_records`; this module only reads records and keeps what the
reconciler needs from them (ids and names, never a credential).

Reads come from a live watch of the bucket (ADR 0122): a settled fleet's periodic ARS passes
read nothing from NATS. An ARS the registrar or a listener just told about (:meth:`refresh`)
reads the bucket itself until a read finds the watch caught up, because the watch may be one
delivery behind the write the event announced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from nats.aio.client import Client as NatsClient
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from opentelemetry.metrics import Counter

from arcflow.common.nats.kv_mirror import KvMirror
from arcflow.common.scaleset_records import InvalidRecordKeyError, record_key
from arcflow.reconciler.assignments import ScaleSetAssignment, parse_record


class ScaleSetIds:
    """Per-variant assignments of one ARS, read on every reconcile (level-triggered): from the
    watch while it is live and the ARS is not waiting for a write, else from the bucket."""

    def __init__(
        self, kv: KeyValue, reads: Counter | None = None, connection: NatsClient | None = None
    ) -> None:
        self._kv = kv
        self._reads = reads
        self._mirror: KvMirror[bytes] = KvMirror(
            kv, bytes, what="scale set record", connection=connection
        )
        #: ARSs (namespace, name) whose next reads go to the bucket.
        self._refresh: set[tuple[str, str]] = set()

    async def start(self) -> None:
        await self._mirror.start()

    async def stop(self) -> None:
        await self._mirror.stop()

    def caught_up(self, namespace: str, ars: str, variant: str, value: bytes | None) -> bool:
        """Whether a read of this record now sees ``value`` (``None``: no record): the watch has
        delivered it, or reads go to the bucket anyway. For a test that writes the bucket
        behind the registrar's back."""
        if not self._mirror.live or (namespace, ars) in self._refresh:
            return True
        return self._mirror.get(_key(namespace, ars, variant)) == value

    def refresh(self, namespace: str, ars: str) -> None:
        """The registrar or a listener announced a change of this ARS: read the bucket."""
        self._refresh.add((namespace, ars))

    async def assignments(
        self, namespace: str, ars: str, variants: Iterable[str]
    ) -> dict[str, ScaleSetAssignment]:
        """Assignments of the given variants; a variant not registered yet is absent.

        From the bucket, the variants' records are read together: one round trip of latency
        per ARS pass, not one per variant (ADR 0040)."""
        names = list(variants)
        keys = [_key(namespace, ars, v) for v in names]
        if self._mirror.live and (namespace, ars) not in self._refresh:
            self._count("watch", len(keys))
            entries = [self._mirror.get(k) if k else None for k in keys]
        else:
            self._count("bucket", len(keys))
            entries = list(await asyncio.gather(*(self._get(k) for k in keys)))
            if self._mirror.live and all(
                self._mirror.get(k) == e for k, e in zip(keys, entries, strict=True) if k
            ):
                self._refresh.discard((namespace, ars))  # the watch has caught up
        found: dict[str, ScaleSetAssignment] = {}
        for variant, data in zip(names, entries, strict=True):
            if data is None:
                continue
            assignment = parse_record(variant, data)
            if assignment is not None:
                found[variant] = assignment
        return found

    def _count(self, source: str, n: int) -> None:
        if self._reads is not None:
            self._reads.add(n, {"source": source})

    async def _get(self, key: str) -> bytes | None:
        if not key:
            return None
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        return entry.value


def _key(namespace: str, ars: str, variant: str) -> str:
    """The record's key; empty for a name no key can hold (never registered either: absent,
    like a new one)."""
    try:
        return record_key(namespace, ars, variant)
    except InvalidRecordKeyError:
        return ""
