"""Reading the registrar's scale set ids from the ``arcflow_scalesets`` KV bucket.

The registrar owns the bucket. Key encoding and record JSON are the shared contract in
:mod:`arcflow.common.scaleset_records`; this module only reads records and keeps what the
reconciler needs from them (ids and names, never a credential).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from arcflow.common.scaleset_records import InvalidRecordKeyError, record_key
from arcflow.reconciler.assignments import ScaleSetAssignment, parse_record


class ScaleSetIds:
    """Per-variant assignments of one ARS, read fresh on every reconcile (level-triggered)."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def assignments(
        self, namespace: str, ars: str, variants: Iterable[str]
    ) -> dict[str, ScaleSetAssignment]:
        """Assignments of the given variants; a variant not registered yet is absent.

        The variants' records are read together: one round trip of latency per ARS pass,
        not one per variant (ADR 0040)."""
        names = list(variants)
        entries = await asyncio.gather(*(self._get(namespace, ars, v) for v in names))
        found: dict[str, ScaleSetAssignment] = {}
        for variant, data in zip(names, entries, strict=True):
            if data is None:
                continue
            assignment = parse_record(variant, data)
            if assignment is not None:
                found[variant] = assignment
        return found

    async def _get(self, namespace: str, ars: str, variant: str) -> bytes | None:
        try:
            entry = await self._kv.get(record_key(namespace, ars, variant))
        except (KeyNotFoundError, InvalidRecordKeyError):
            # A name no key can hold was never registered either: absent, like a new one.
            return None
        return entry.value
