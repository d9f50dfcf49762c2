"""ADR 0074: the listener drops the source lines formatting a traceback cached, in a running
loop, and its housekeeping stops promptly."""

from __future__ import annotations

import asyncio
import linecache
import traceback

from arcflow.listener.housekeeping import forget_source_lines, housekeeping


def _format_a_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError as exc:
        traceback.format_exception(exc)


def test_forget_source_lines_drops_what_a_traceback_cached() -> None:
    _format_a_traceback()
    assert __file__ in linecache.cache  # formatting read this whole file
    forget_source_lines()
    assert __file__ not in linecache.cache
    assert linecache.getline(__file__, 1)  # the next traceback reads it again


async def test_housekeeping_keeps_dropping_source_lines_until_stopped() -> None:
    stop = asyncio.Event()
    task = asyncio.ensure_future(housekeeping(stop, every=0.05))
    loop = asyncio.get_running_loop()
    for _ in range(2):  # not only once
        _format_a_traceback()
        deadline = loop.time() + 10
        while __file__ in linecache.cache:
            assert loop.time() < deadline, "cached source lines were not dropped within 10 s"
            await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_housekeeping_stops_at_once() -> None:
    stop = asyncio.Event()
    task = asyncio.ensure_future(housekeeping(stop, every=3600))
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, 5)
