"""Capped backoff supervision: delays, reset after a clean run, stop, fatal errors."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.listener.supervisor import Backoff, FatalError, SupervisorStats, supervise


def test_backoff_doubles_from_one_second_to_two_minutes() -> None:
    policy = Backoff()
    delays = [policy.initial]
    for _ in range(9):
        delays.append(policy.next(delays[-1]))
    assert delays == [1, 2, 4, 8, 16, 32, 64, 120, 120, 120]


async def test_supervise_backs_off_resets_after_clean_run_and_stops() -> None:
    stop = asyncio.Event()
    waits: list[float] = []
    outcomes = iter(["fail", "fail", "fail", "clean", "fail", "stop"])

    async def sleep(delay: float) -> None:
        waits.append(delay)

    async def run(_stop: asyncio.Event) -> None:
        outcome = next(outcomes)
        if outcome == "fail":
            raise RuntimeError("session broke")
        if outcome == "stop":
            stop.set()

    stats = SupervisorStats()
    await asyncio.wait_for(supervise("pump", run, stop, sleep=sleep, stats=stats), 5)
    assert waits == [1, 2, 4, 1]
    assert (stats.starts, stats.failures, stats.clean_exits) == (6, 4, 1)
    assert stats.last_error == "RuntimeError: session broke"


async def test_supervise_waits_interruptibly_and_fatal_errors_propagate() -> None:
    stop = asyncio.Event()

    async def failing(_stop: asyncio.Event) -> None:
        raise RuntimeError("boom")

    task = asyncio.ensure_future(supervise("pump", failing, stop, backoff=Backoff(initial=60)))
    await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 2)  # the 60 s wait ends at once on stop

    async def fatal(_stop: asyncio.Event) -> None:
        raise FatalError("bad config")

    with pytest.raises(FatalError, match="bad config"):
        await supervise("pump", fatal, asyncio.Event())
