"""A KV bucket's current values in memory, from one live watch (ADR 0122).

:class:`KvMirror` follows ``KeyValue.watchall()`` (nats-py's ordered consumer): the bucket's
values are replayed, then every put and delete arrives as it happens. Until the replay has
ended the mirror is not :attr:`~KvMirror.live`, and it stops being live while its watch is
down: given its connection, the mirror is not live from the moment that connection drops until
a new watch, started after the reconnect, has replayed the bucket. A reader asks
:attr:`~KvMirror.live` and reads the bucket itself when it is not. Keys a new watch did not
replay (deleted while the last one was down) are dropped. A value the ``decode`` callback
refuses is left out and logged with its key only.

A live mirror is at most one delivery behind the bucket: a reader that must see a write it was
told about (an event published after the write) reads the bucket for that read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

import nats.errors
from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Wait after a failed watch before the next one.
RETRY_SECONDS = 1.0
#: How often a quiet watch looks at its connection.
CHECK_SECONDS = 1.0


class KvMirror(Generic[T]):
    """``start()``; then :meth:`get` and :meth:`values` from memory while :attr:`live`."""

    def __init__(
        self,
        kv: KeyValue,
        decode: Callable[[bytes], T],
        *,
        what: str,
        connection: NatsClient | None = None,
    ) -> None:
        self._kv = kv
        self._decode = decode
        self._what = what
        #: The client the bucket is read through: a watch is trusted only while it stays
        #: connected (nats-py's watch neither ends nor fails when the connection drops, and
        #: after a reconnect it may miss writes until its consumer is reset).
        self._connection = connection
        self._values: dict[str, T] = {}
        self._synced = asyncio.Event()
        self._live = False
        self._reconnects = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        """The watch is running, has replayed the bucket, and its connection has not dropped
        since the watch began."""
        return self._live and not self._connection_changed()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name=f"kv-mirror-{self._what}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._live = False
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def synced(self) -> None:
        """Until the first replay has ended (it stays set across later reconnects)."""
        await self._synced.wait()

    def get(self, key: str) -> T | None:
        return self._values.get(key)

    def values(self) -> list[T]:
        return list(self._values.values())

    async def _follow(self) -> None:
        while True:
            try:
                await self._watch()
            except asyncio.CancelledError:
                raise
            except (nats.errors.Error, OSError, TimeoutError) as exc:
                log.warning(
                    "KV watch failed; reads go to the bucket until it is back",
                    extra={"bucket_of": self._what, "error": type(exc).__name__},
                )
            await asyncio.sleep(RETRY_SECONDS)  # a watch that ended or failed: the next one

    async def _watch(self) -> None:
        """One watch, from its replay until it stops or its connection drops."""
        self._reconnects = self._reconnect_count()
        watcher = await self._kv.watchall()
        try:
            replayed: set[str] | None = set()
            while not self._connection_changed():
                try:
                    entry = await watcher.updates(timeout=CHECK_SECONDS)  # type: ignore[no-untyped-call]
                except nats.errors.TimeoutError:
                    continue
                if entry is None:  # the bucket's values are all delivered
                    if replayed is not None:
                        # keys deleted while an earlier watch was down were not replayed
                        for key in set(self._values) - replayed:
                            del self._values[key]
                        replayed = None
                    self._live = True
                    self._synced.set()
                elif isinstance(entry, KeyValue.Entry):
                    if replayed is not None:
                        replayed.add(entry.key)
                    self._apply(entry.key, entry.value, entry.operation)
                else:  # the watcher was stopped
                    return
        finally:
            self._live = False
            with contextlib.suppress(Exception):
                await watcher.stop()  # type: ignore[no-untyped-call]

    def _reconnect_count(self) -> int:
        return int(self._connection.stats["reconnects"]) if self._connection else 0

    def _connection_changed(self) -> bool:
        if self._connection is None:
            return False
        return not self._connection.is_connected or self._reconnect_count() != self._reconnects

    def _apply(self, key: str, value: bytes | None, operation: str | None) -> None:
        if operation in ("DEL", "PURGE") or not value:
            self._values.pop(key, None)
            return
        try:
            self._values[key] = self._decode(value)
        except ValueError:
            self._values.pop(key, None)
            log.error("ignoring a malformed %s value", self._what, extra={"key": key})
