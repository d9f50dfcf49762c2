"""The settle pool's two promises (ADR 0035), without a server: in stream order with one
worker; with several, a slow message holds one worker and never the next fetch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from arcflow.common.nats.jetstream import ConsumerSpec
from arcflow.common.service.settle import SettlePool
from tests.polling import eventually

SPEC = ConsumerSpec("pool-test", "ARC_K8S", "arc.k8s.>")


def _true(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return predicate()

    return check


class Recorder:
    """Stands in for ``EventConsumer``: records what it settled, holds "slow" until released."""

    def __init__(self) -> None:
        self.spec = SPEC
        self.settled: list[str] = []
        self.release = asyncio.Event()

    async def process(self, msg: Any) -> None:
        if msg == "slow":
            await self.release.wait()
        else:
            await asyncio.sleep(0)
        self.settled.append(msg)


async def test_one_worker_settles_in_stream_order_before_the_next_fetch() -> None:
    recorder = Recorder()
    pool = SettlePool(recorder, concurrency=1)  # type: ignore[arg-type]
    await pool.submit([f"m{i}" for i in range(20)])
    assert recorder.settled == [f"m{i}" for i in range(20)]  # all settled when submit returns
    await pool.submit(["n0", "n1"])
    assert recorder.settled[-2:] == ["n0", "n1"]


async def test_a_slow_message_holds_one_worker_not_the_next_fetch() -> None:
    recorder = Recorder()
    pool = SettlePool(recorder, concurrency=4)  # type: ignore[arg-type]
    await asyncio.wait_for(pool.submit(["slow", "a", "b", "c"]), 5)
    await asyncio.wait_for(pool.submit(["d", "e", "f"]), 5)  # the next fetch is not held
    await eventually(_true(lambda: len(recorder.settled) == 6), within=5)
    assert sorted(recorder.settled) == ["a", "b", "c", "d", "e", "f"]
    recorder.release.set()
    await eventually(_true(lambda: "slow" in recorder.settled), within=5)
    assert recorder.settled[-1] == "slow"
    await pool.stop()


async def test_stop_cancels_what_is_being_settled() -> None:
    recorder = Recorder()
    pool = SettlePool(recorder, concurrency=2)  # type: ignore[arg-type]
    await asyncio.wait_for(pool.submit(["slow", "x"]), 5)
    await eventually(_true(lambda: recorder.settled == ["x"]), within=5)
    await pool.stop()
    recorder.release.set()
    await asyncio.sleep(0)  # a cancelled worker would have resumed here
    assert recorder.settled == ["x"]  # "slow" was cancelled: never acked, JetStream redelivers


async def test_the_next_fetch_waits_until_every_fetched_message_has_a_worker() -> None:
    recorder = Recorder()
    pool = SettlePool(recorder, concurrency=2)  # type: ignore[arg-type]
    await asyncio.wait_for(pool.submit(["slow", "slow"]), 5)  # returns at once
    assert await asyncio.wait_for(pool.room(16), 5) == 16  # both started: fetch again
    await asyncio.wait_for(pool.submit(["x"]), 5)
    assert pool.waiting == 1  # behind the two slow ones
    room = asyncio.create_task(pool.room(16))
    done, _ = await asyncio.wait({room}, timeout=0.2)
    assert not done  # one fetch waits at most: no further fetch meanwhile
    recorder.release.set()
    assert await asyncio.wait_for(room, 5) == 16
    await eventually(_true(lambda: sorted(recorder.settled) == ["slow", "slow", "x"]), within=5)
    await pool.stop()
