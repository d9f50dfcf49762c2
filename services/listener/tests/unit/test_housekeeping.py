"""ADR 0074: the listener drops the source lines a traceback cached and freezes its start-up
objects once it serves; both in a running loop, stopped promptly."""

from __future__ import annotations

import asyncio
import gc
import linecache
import traceback
from collections.abc import Iterator

import pytest

from arcflow.listener.housekeeping import forget_source_lines, housekeeping


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process must not keep what this test froze


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


async def test_housekeeping_freezes_once_then_keeps_dropping_source_lines(
    unfrozen: None,
) -> None:
    stop = asyncio.Event()
    frozen_before = gc.get_freeze_count()
    task = asyncio.ensure_future(housekeeping(stop, every=0.05, freeze_after=0.05))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while gc.get_freeze_count() <= frozen_before:
        assert loop.time() < deadline, "start-up objects were not frozen within 10 s"
        await asyncio.sleep(0.02)
    _format_a_traceback()
    while __file__ in linecache.cache:
        assert loop.time() < deadline, "cached source lines were not dropped within 10 s"
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_housekeeping_without_freeze_stops_at_once() -> None:
    stop = asyncio.Event()
    frozen_before = gc.get_freeze_count()
    task = asyncio.ensure_future(housekeeping(stop, every=3600, freeze_after=None))
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert gc.get_freeze_count() == frozen_before
