"""The registrations in the ``scalesets`` KV bucket: one :class:`ScaleSetRecord` per
(namespace, ARS, variant), read and written by the converge pass, read by the RPC server."""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue

from arcflow.common.nats import KV_SCALESETS
from arcflow.common.scaleset_records import ScaleSetRecord, ars_key_filter

log = logging.getLogger(__name__)

#: Deadline of one KV snapshot read (a stuck read must not hold a converge forever).
_KV_SNAPSHOT_DEADLINE: Final = 15.0


class ScaleSetRecords:
    """Reads and writes of the registrations bucket."""

    def __init__(self, js: JetStreamContext, kv: KeyValue) -> None:
        self.js = js
        self.kv = kv

    async def load(
        self, namespace: str | None = None, ars: str | None = None
    ) -> list[ScaleSetRecord]:
        """Registrations of one ARS (or all of them).

        The keys come from the bucket stream's subject list (one ``STREAM.INFO`` request with a
        subject filter) and each value from a direct get: no consumer is created, so nothing
        can be left behind, and every request has the client's timeout. A KV watch would
        create an ephemeral consumer per read, which the server keeps for 5 minutes when the
        read is interrupted (issue 12 item 6).
        """
        key_filter = ">" if namespace is None or ars is None else ars_key_filter(namespace, ars)
        stream = f"KV_{KV_SCALESETS.bucket}"
        prefix = f"$KV.{KV_SCALESETS.bucket}."
        async with asyncio.timeout(_KV_SNAPSHOT_DEADLINE):
            info = await self.js.stream_info(stream, subjects_filter=prefix + key_filter)
            keys = sorted(s.removeprefix(prefix) for s in (info.state.subjects or {}))
            found: list[ScaleSetRecord] = []
            for key in keys:
                try:
                    entry = await self.kv.get(key)
                except (KeyNotFoundError, KeyDeletedError):
                    continue  # deleted (a delete marker is the subject's last message)
                if not entry.value:
                    continue
                try:
                    found.append(ScaleSetRecord.decode(entry.value))
                except ValueError:
                    log.error("ignoring a malformed scale set record", extra={"key": key})
        return found

    async def by_variant(self, namespace: str, ars: str) -> dict[str, ScaleSetRecord]:
        return {r.variant: r for r in await self.load(namespace, ars)}

    async def put(self, record: ScaleSetRecord) -> None:
        await self.kv.put(record.key, record.encode())

    async def delete(self, record: ScaleSetRecord) -> None:
        await self.kv.delete(record.key)
