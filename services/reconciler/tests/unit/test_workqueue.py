"""The reconciler's work queue, built by the controller runtime from its declared controllers,
takes keys by kind (the queue itself: libs/common/tests/unit/test_workqueue.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from arcflow.common.reconcile.manager import Manager
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.keys import Key, Result


async def test_work_queue_takes_listeners_before_a_backlog_of_runners() -> None:
    order: list[Key] = []
    release = asyncio.Event()

    async def run(_ctx: Any, key: Key, _call: Callable[[Any], Awaitable[Result]]) -> Result:
        order.append(key)
        if len(order) == 1:
            await release.wait()  # the one worker is busy while the backlog builds up
        return Result.done()

    queue = Manager(DECLARED, lambda _m: None, run=run, workers=1).queue
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
