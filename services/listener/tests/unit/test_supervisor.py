"""Capped backoff supervision: delays, reset after a clean run, stop, fatal errors."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.listener.supervisor import Backoff, FatalError, SupervisorStats, supervise


def test_backoff_doubles_from_one_second_to_five_with_jitter_below() -> None:
    policy = Backoff()
    delays = [policy.initial]
    for _ in range(5):
        delays.append(policy.next(delays[-1]))
    assert delays == [1, 2, 4, 5, 5, 5]
    # Jitter only shortens a wait, by at most a quarter.
    assert policy.wait(4.0, lambda: 0.0) == 4.0
    assert policy.wait(4.0, lambda: 0.999) == pytest.approx(3.0, abs=0.01)
    with pytest.raises(ValueError, match="jitter"):
        Backoff(jitter=1.0)


async def test_a_failure_after_progress_starts_the_backoff_again() -> None:
    """A session that polled, then broke, is retried after the initial delay, not after the
    delay earlier faults left behind (reliability finding 5)."""
    stop = asyncio.Event()
    waits: list[float] = []
    polls = 0
    outcomes = iter(["fail", "fail", "fail", "poll-then-fail", "fail", "stop"])

    async def sleep(delay: float) -> None:
        waits.append(delay)

    async def run(_stop: asyncio.Event) -> None:
        nonlocal polls
        outcome = next(outcomes)
        if outcome == "stop":
            stop.set()
            return
        if outcome == "poll-then-fail":
            polls += 1
        raise RuntimeError("session lost")

    policy = Backoff(jitter=0.0)
    await asyncio.wait_for(
        supervise("pump", run, stop, backoff=policy, sleep=sleep, progress=lambda: polls), 5
    )
    assert waits == [1, 2, 4, 1, 2]


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
    policy = Backoff(jitter=0.0)
    await asyncio.wait_for(
        supervise("pump", run, stop, backoff=policy, sleep=sleep, stats=stats), 5
    )
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
