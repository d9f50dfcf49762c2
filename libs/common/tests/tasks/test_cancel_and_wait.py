"""cancel_and_wait ends tasks that swallow a cancellation, and never hangs on one that won't end."""

from __future__ import annotations

import asyncio

from arcflow.common.tasks import cancel_and_wait


async def _swallows_cancellations(times: int, ended: list[str]) -> None:
    """Like a fetch loop whose cancellation got lost: it carries on ``times`` times."""
    swallowed = 0
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if swallowed < times:
                swallowed += 1
                continue
            ended.append("stopped")
            raise


async def test_a_swallowed_cancellation_is_repeated_until_the_task_ends() -> None:
    ended: list[str] = []
    task = asyncio.create_task(_swallows_cancellations(2, ended))
    await asyncio.sleep(0)
    left = await cancel_and_wait([task], grace=5.0, interval=0.01)
    assert left == []
    assert task.cancelled()
    assert ended == ["stopped"]


async def test_a_task_that_never_ends_is_reported_after_the_grace_period() -> None:
    give_up = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if give_up.is_set():
                    raise

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    left = await cancel_and_wait([task], grace=0.2, interval=0.02)
    assert [t.get_name() for t in left] == ["stubborn"]
    assert loop.time() - started < 2.0, "stop must be bounded"
    assert not task.done()
    give_up.set()
    assert await cancel_and_wait([task], grace=1.0, interval=0.02) == []


async def test_done_and_missing_tasks_are_ignored() -> None:
    finished = asyncio.create_task(asyncio.sleep(0))
    await finished
    assert await cancel_and_wait([finished, None]) == []
