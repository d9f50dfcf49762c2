"""What the live pump of one scale set published in its current GitHub session (in-process).

The worker must not trust numbers a publisher chooses (a GitHub message id in a batch body can
be anything). What it can trust: the stream sequence JetStream assigned, and what its own pump,
in the same process, told it. The pump records, per message of its live session, the stream
sequence of the PubAck; the worker checks a batch that claims the live session against it, and
treats a batch of any other session stored after the live session's first publish as forged
(sessions of one scale set never overlap: GitHub answers 409 to a second one).

The ledger also holds the newest statistics the pump received in the live session (ADR 0028):
the worker scales from them rather than from the older statistics of the batch it is handling,
so a backlog of batches never turns into decisions about jobs that are already done.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from arcflow.common.events import JobStatistics

#: Message ids remembered per session (a session's messages are handled in seconds).
LEDGER_CAPACITY = 4096


@dataclass(frozen=True)
class ObservedStatistics:
    """GitHub's statistics as they came with one message of the live session."""

    session_id: str
    message_id: int
    statistics: JobStatistics


class SessionLedger:
    """The live session id and the stream sequence of each message its pump published."""

    def __init__(self, capacity: int = LEDGER_CAPACITY) -> None:
        self.session_id: str | None = None
        #: Stream sequence of the first message stored (not de-duplicated) in the live session.
        self.first_seq: int | None = None
        self._capacity = capacity
        self._published: OrderedDict[int, asyncio.Future[int]] = OrderedDict()
        #: Highest stream sequence among entries dropped for capacity (0: none).
        self._evicted_seq = 0
        #: The newest statistics the pump received in the live session.
        self.newest: ObservedStatistics | None = None

    def open(self, session_id: str) -> None:
        self.close()
        self.session_id = session_id

    def close(self) -> None:
        self.session_id = None
        self.first_seq = None
        self._evicted_seq = 0
        self.newest = None
        for future in self._published.values():
            future.cancel()
        self._published.clear()

    def expect(self, message_id: int) -> None:
        """Called before publishing: the worker may see the batch before the PubAck returns."""
        if message_id in self._published:
            return
        self._published[message_id] = asyncio.get_running_loop().create_future()
        while len(self._published) > self._capacity:
            _, oldest = self._published.popitem(last=False)
            if oldest.done() and not oldest.cancelled():
                self._evicted_seq = max(self._evicted_seq, oldest.result())
            oldest.cancel()

    def published(self, message_id: int, stream_seq: int, *, duplicate: bool) -> None:
        """The PubAck of ``message_id``: ``stream_seq`` is where JetStream stored it."""
        future = self._published.get(message_id)
        if future is None:
            self.expect(message_id)
            future = self._published[message_id]
        if not future.done():
            future.set_result(stream_seq)
        if not duplicate and self.first_seq is None:
            self.first_seq = stream_seq

    def observed(self, message_id: int, statistics: JobStatistics) -> None:
        """The statistics GitHub sent with ``message_id`` of the live session (kept if newest)."""
        session = self.session_id
        if session is None:
            return
        newest = self.newest
        if newest is None or newest.session_id != session or message_id > newest.message_id:
            self.newest = ObservedStatistics(session, message_id, statistics)

    def newer_statistics(self, session_id: str, message_id: int) -> ObservedStatistics | None:
        """Statistics of a later message of ``session_id`` than ``message_id``, if the pump
        has received one (they describe GitHub's queue more recently)."""
        newest = self.newest
        if (
            newest is None
            or not session_id
            or newest.session_id != session_id
            or newest.session_id != self.session_id
            or newest.message_id <= message_id
        ):
            return None
        return newest

    def too_old_to_tell(self, stream_seq: int) -> bool:
        """Whether ``stream_seq`` lies in the part of the live session no longer remembered
        (a redelivery of an old message of a very long session)."""
        return self.first_seq is not None and self.first_seq <= stream_seq <= self._evicted_seq

    def failed(self, message_id: int) -> None:
        future = self._published.pop(message_id, None)
        if future is not None:
            future.cancel()

    async def stream_seq_of(self, message_id: int, timeout: float) -> int | None:  # noqa: ASYNC109
        """The recorded sequence, waiting up to ``timeout`` for a PubAck in flight; ``None``
        when the pump never published ``message_id`` in this session."""
        future = self._published.get(message_id)
        if future is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if future.cancelled() and (task is None or not task.cancelling()):
                return None  # the session closed while we waited
            raise
