"""The reconciler's work queue takes keys by kind (the queue itself:
libs/common/tests/unit/test_workqueue.py)."""

from __future__ import annotations

import asyncio

from arcflow.reconciler.keys import Key, Result
from arcflow.reconciler.workqueue import WorkQueue


async def test_work_queue_takes_listeners_before_a_backlog_of_runners() -> None:
    order: list[Key] = []
    release = asyncio.Event()

    async def reconcile(key: Key) -> Result:
        order.append(key)
        if len(order) == 1:
            await release.wait()  # the one worker is busy while the backlog builds up
        return Result.done()

    queue = WorkQueue(reconcile, workers=1)
    queue.start()
    try:
        runners = [Key("er", "ns", f"runner-{i}") for i in range(5)]
        queue.add(runners[0])
        await asyncio.sleep(0)
        backlog = [*runners[1:], Key("ers", "ns", "set"), Key("ars", "ns", "a")]
        for key in [*backlog, Key("al", "ns", "listener")]:
            queue.add(key)
        release.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert order == [
        runners[0],
        Key("al", "ns", "listener"),
        Key("ars", "ns", "a"),
        Key("ers", "ns", "set"),
        *runners[1:],
    ]
