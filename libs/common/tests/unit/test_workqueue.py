"""The work queue (arcflow.common.reconcile.workqueue): one reconcile per key at a time,
retries with backoff, coalescing, deadlines, terminal errors."""

from __future__ import annotations

import asyncio

from arcflow.common.kube import InvalidError
from arcflow.common.reconcile.keys import Key, Result
from arcflow.common.reconcile.workqueue import WorkQueue, backoff_delay
from tests.polling import eventually


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_delay(n, 0.5, 3.0) for n in range(5)] == [0.0, 0.5, 1.0, 2.0, 3.0]


async def test_work_queue_serialises_per_key_and_retries() -> None:
    running: set[Key[str]] = set()
    overlaps = 0
    calls: dict[Key[str], int] = {}
    a = Key("ars", "ns", "a")
    first_run_of_a = asyncio.Event()
    release_a = asyncio.Event()

    async def reconcile(key: Key[str]) -> Result:
        nonlocal overlaps
        if key in running:
            overlaps += 1
        running.add(key)
        calls[key] = calls.get(key, 0) + 1
        if key == a and calls[key] == 1:
            first_run_of_a.set()
            await release_a.wait()  # in flight while the same key is added again
        await asyncio.sleep(0)
        running.discard(key)
        if key.name == "flaky" and calls[key] < 3:
            raise RuntimeError("boom")
        return Result.done()

    queue: WorkQueue[Key[str]] = WorkQueue(
        reconcile, workers=4, retry_base_seconds=0.01, retry_cap_seconds=0.02
    )
    queue.start()
    try:
        queue.add(a)
        await asyncio.wait_for(first_run_of_a.wait(), 5)
        for _ in range(4):
            queue.add(a)
        queue.add(Key("ars", "ns", "flaky"))
        release_a.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert overlaps == 0
    assert calls[a] == 2  # four adds while in flight coalesce into one more run
    assert calls[Key("ars", "ns", "flaky")] == 3


async def test_work_queue_drops_a_terminal_error_until_the_next_add() -> None:
    calls: dict[str, int] = {}

    async def reconcile(key: Key[str]) -> Result:
        calls[key.name] = calls.get(key.name, 0) + 1
        if key.name == "invalid":
            raise InvalidError("spec.replicas: must be >= 0", status=422)
        raise RuntimeError("try again")

    queue = WorkQueue(reconcile, workers=2, retry_base_seconds=0.01, retry_cap_seconds=0.01)
    queue.start()
    try:
        queue.add(Key("ers", "ns", "invalid"))
        queue.add(Key("ers", "ns", "flaky"))
        await asyncio.sleep(0.3)
        assert calls["invalid"] == 1  # terminal: not retried
        assert calls["flaky"] > 3  # retryable: retried with backoff
        queue.add(Key("ers", "ns", "invalid"))  # a new event runs it again
        await asyncio.sleep(0.05)
        assert calls["invalid"] == 2
    finally:
        await queue.stop()


async def test_adds_while_waiting_coalesce_and_a_pass_past_its_deadline_is_retried() -> None:
    calls: dict[str, int] = {}
    gate = asyncio.Event()

    async def reconcile(key: Key[str]) -> Result:
        calls[key.name] = calls.get(key.name, 0) + 1
        if key.name == "slow" and calls[key.name] == 1:
            await asyncio.sleep(10)  # past the deadline: cancelled, then retried
        await gate.wait()
        return Result.done()

    queue: WorkQueue[Key[str]] = WorkQueue(
        reconcile, workers=2, retry_base_seconds=0.01, deadline_seconds=0.1
    )
    queue.start()
    try:
        queue.add(Key("ars", "ns", "slow"))
        queue.add(Key("ars", "ns", "a"))
        await asyncio.sleep(0.02)  # both in flight
        for _ in range(3):
            queue.add(Key("ars", "ns", "a"))  # the first makes one more pass, two coalesce
        gate.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert calls == {"slow": 2, "a": 2}
    assert queue.coalesced == 2


async def test_stop_drains_passes_in_flight_within_the_bound_and_takes_no_new_key() -> None:
    """Issue 33: on SIGTERM a pass in flight finishes (within ``drain_seconds``), no waiting
    key is started, and a pass that outlives the bound is cancelled."""
    started: list[str] = []
    finished: list[str] = []
    cancelled: list[str] = []
    in_flight = asyncio.Event()
    release = asyncio.Event()

    async def reconcile(key: Key[str]) -> Result:
        started.append(key.name)
        in_flight.set()
        try:
            if key.name == "slow":
                await asyncio.sleep(30)
            else:
                await release.wait()
        except asyncio.CancelledError:
            cancelled.append(key.name)
            raise
        finished.append(key.name)
        return Result.done()

    queue: WorkQueue[Key[str]] = WorkQueue(reconcile, workers=1)
    queue.start()
    queue.add(Key("er", "ns", "busy"))
    await asyncio.wait_for(in_flight.wait(), 5)
    queue.add(Key("er", "ns", "waiting"))  # queued behind it
    stopping = asyncio.create_task(queue.stop(drain_seconds=5))
    await asyncio.sleep(0.1)
    assert not stopping.done()  # draining, not cancelling
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert finished == ["busy"]
    assert started == ["busy"]  # the waiting key is left to the next process

    in_flight.clear()
    bounded: WorkQueue[Key[str]] = WorkQueue(reconcile, workers=1)
    bounded.start()
    bounded.add(Key("er", "ns", "slow"))
    await asyncio.wait_for(in_flight.wait(), 5)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await bounded.stop(drain_seconds=0.3)
    assert 0.25 <= loop.time() - began < 5
    assert cancelled == ["slow"]


async def test_a_kind_at_its_cap_waits_while_other_kinds_take_the_workers() -> None:
    """Issue 33: ``caps`` bounds one kind's passes within the shared pool; the other kinds
    run meanwhile, and every capped key runs in the end (once, in order)."""
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    order: list[str] = []
    release = asyncio.Event()
    ars_ran = asyncio.Event()

    async def reconcile(key: Key[str]) -> Result:
        running[key.kind] = running.get(key.kind, 0) + 1
        peak[key.kind] = max(peak.get(key.kind, 0), running[key.kind])
        order.append(key.name)
        if key.kind == "ars":
            ars_ran.set()
        else:
            await release.wait()
        running[key.kind] -= 1
        return Result.done()

    queue: WorkQueue[Key[str]] = WorkQueue(reconcile, workers=4, caps={"er": 2})
    queue.start()
    try:
        for index in range(5):
            queue.add(Key("er", "ns", f"r{index}"))
        queue.add(Key("er", "ns", "r4"))  # coalesces with the waiting one
        queue.add(Key("ars", "ns", "set"))
        await asyncio.wait_for(ars_ran.wait(), 5)  # not behind the capped runner keys
        assert running.get("er") == 2
        release.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert peak["er"] == 2
    assert sorted(order) == ["r0", "r1", "r2", "r3", "r4", "set"]
    assert [name for name in order if name.startswith("r")] == ["r0", "r1", "r2", "r3", "r4"]


async def test_a_key_is_busy_until_the_pass_after_its_last_add_ended() -> None:
    """``is_busy``: queued, in flight or due again after the pass in flight; the look again
    later a pass returns (a timer) is not busy, though the key is still waiting."""
    key = Key("ers", "ns", "a")
    started = [asyncio.Event(), asyncio.Event()]
    release = [asyncio.Event(), asyncio.Event()]
    ended = asyncio.Event()
    passes = 0

    async def reconcile(_key: Key[str]) -> Result:
        nonlocal passes
        passes += 1
        started[passes - 1].set()
        await release[passes - 1].wait()
        if passes == 2:
            ended.set()
        return Result.again(60)

    queue: WorkQueue[Key[str]] = WorkQueue(reconcile, workers=1)
    assert not queue.is_busy(key)
    queue.add(key)
    assert queue.is_busy(key)  # queued
    queue.start()
    try:
        await asyncio.wait_for(started[0].wait(), 5)
        assert queue.is_busy(key)  # in flight
        queue.add(key)  # a change while in flight: due again after this pass
        release[0].set()
        await asyncio.wait_for(started[1].wait(), 5)
        assert queue.is_busy(key)
        release[1].set()
        await asyncio.wait_for(ended.wait(), 5)

        async def settled() -> bool:  # the worker ends a pass a moment after its reconcile
            return not queue.is_busy(key)

        await eventually(settled, within=5, interval=0.01, what="the key not busy")
        assert queue.is_waiting(key)  # on its 60 s timer
        assert passes == 2
    finally:
        await queue.stop()


async def test_settled_adds_coalesce_into_one_pass_that_comes_later() -> None:
    """``add_settled``: the adds within the settle time make one pass at its end, the key is
    busy meanwhile, and a plain add runs it at once instead."""
    key = Key("ers", "ns", "a")
    passes: list[float] = []
    loop = asyncio.get_running_loop()

    async def reconcile(_key: Key[str]) -> Result:
        passes.append(loop.time())
        return Result.done()

    queue: WorkQueue[Key[str]] = WorkQueue(reconcile, workers=1)
    queue.start()
    try:
        first = loop.time()
        for _ in range(50):
            queue.add_settled(key, 0.3)
        assert queue.is_busy(key)  # a change waits for its pass
        assert passes == []
        await queue.wait_idle(5)
        assert len(passes) == 1
        assert passes[0] - first >= 0.3
        assert queue.coalesced == 49

        queue.add_settled(key, 30)
        queue.add(key)  # a change that must be seen now does not wait for the settle
        await queue.wait_idle(5)
        assert len(passes) == 2
        assert not queue.is_busy(key)
    finally:
        await queue.stop()
