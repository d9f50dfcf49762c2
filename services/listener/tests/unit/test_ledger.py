"""The session ledger: what the live pump published, at which stream sequence."""

from __future__ import annotations

import asyncio

from arcflow.common.events import JobStatistics
from arcflow.listener.ledger import SessionLedger


async def test_records_waits_for_a_puback_in_flight_and_forgets_on_close() -> None:
    ledger = SessionLedger(capacity=2)
    ledger.open("s1")
    ledger.expect(10)
    waiting = asyncio.ensure_future(ledger.stream_seq_of(10, timeout=5))
    await asyncio.sleep(0)
    ledger.published(10, 100, duplicate=False)
    assert await waiting == 100
    assert ledger.first_seq == 100
    assert await ledger.stream_seq_of(99, timeout=0.01) is None  # never published
    ledger.published(11, 50, duplicate=True)  # a re-publish stored earlier: not "first"
    assert ledger.first_seq == 100
    ledger.published(12, 101, duplicate=False)
    ledger.published(13, 102, duplicate=False)  # evicts 10 and 11 (capacity 2)
    assert await ledger.stream_seq_of(10, timeout=0.01) is None
    assert ledger.too_old_to_tell(100)
    assert not ledger.too_old_to_tell(103)
    ledger.expect(14)
    pending = asyncio.ensure_future(ledger.stream_seq_of(14, timeout=5))
    await asyncio.sleep(0)
    ledger.close()  # the session ended while the worker waited
    assert await pending is None
    assert ledger.session_id is None
    assert ledger.first_seq is None


def test_newest_statistics_are_kept_per_live_session_and_only_ever_move_forward() -> None:
    ledger = SessionLedger()
    ledger.observed(5, JobStatistics(total_assigned_jobs=9))  # no live session: ignored
    assert ledger.newest is None
    ledger.open("s1")
    ledger.observed(5, JobStatistics(total_assigned_jobs=9))
    ledger.observed(4, JobStatistics(total_assigned_jobs=1))  # older: not kept
    newer = ledger.newer_statistics("s1", 3)
    assert newer is not None
    assert (newer.message_id, newer.statistics.total_assigned_jobs) == (5, 9)
    assert ledger.newer_statistics("s1", 5) is None  # nothing later than the batch itself
    assert ledger.newer_statistics("s0", 3) is None  # another session's batch
    assert ledger.newer_statistics("", 3) is None
    ledger.open("s2")  # a new session forgets the old one's statistics
    assert ledger.newer_statistics("s1", 3) is None
