"""The per-consumer deadline timer (ADR 0055), without a server: an overrunning call is
abandoned with a deadline error, also when it started after the timer was set for an earlier
call; the handler's own timeouts and other cancellations go through unchanged."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arcflow.common.service.deadline import DeadlineWatch, HandlerDeadlineExceededError


async def _hang(_state: Any, _event: Any, _delivery: Any) -> None:
    await asyncio.Event().wait()


async def _quick(_state: Any, _event: Any, _delivery: Any) -> None:
    await asyncio.sleep(0)


async def test_a_call_started_after_an_earlier_one_finished_is_abandoned_at_its_deadline() -> None:
    watch = DeadlineWatch(0.2)
    await watch.bind(_quick, None)(None, None)  # type: ignore[arg-type]  # sets the timer
    await asyncio.sleep(0.1)
    hung = asyncio.create_task(watch.bind(_hang, None)(None, None))  # type: ignore[arg-type]
    quick = [asyncio.create_task(watch.bind(_quick, None)(None, None)) for _ in range(4)]  # type: ignore[arg-type]
    with pytest.raises(HandlerDeadlineExceededError, match=r"0\.2 s deadline"):
        await asyncio.wait_for(hung, 5)
    await asyncio.gather(*quick)  # the quick ones completed normally
    assert watch.in_flight == 0
    assert not hung.cancelling()  # our cancellation was taken back


async def test_the_handlers_own_timeout_and_a_stop_go_through_unchanged() -> None:
    async def times_out(_state: Any, _event: Any, _delivery: Any) -> None:
        raise TimeoutError("the client's own timeout")

    watch = DeadlineWatch(10)
    with pytest.raises(TimeoutError, match="client's own") as raised:
        await watch.bind(times_out, None)(None, None)  # type: ignore[arg-type]
    assert not isinstance(raised.value, HandlerDeadlineExceededError)
    stopped = asyncio.create_task(watch.bind(_hang, None)(None, None))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    stopped.cancel()  # the service stopping
    with pytest.raises(asyncio.CancelledError):
        await stopped
    assert watch.in_flight == 0
