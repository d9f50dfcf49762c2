"""The NATS connection callbacks while our own close is under way: a failed reconnect attempt
ends nats-py's reconnect loop (its error callback raises the cancellation that Python 3.11's
``asyncio.wait_for`` can turn into the connect's error); before the close nothing changes."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.common.service.connection import connection_callbacks


async def test_a_failed_reconnect_during_our_close_ends_the_reconnect_loop() -> None:
    seen: list[Exception] = []

    async def hook(exc: Exception) -> None:
        seen.append(exc)

    error_cb = connection_callbacks("svc", hook, closing=lambda: True)["error_cb"]
    with pytest.raises(asyncio.CancelledError):
        await error_cb(ConnectionRefusedError(111, "refused"))
    assert seen == []  # not reported as an outage: it is our own shutdown


async def test_a_failed_reconnect_while_running_is_reported_and_retried() -> None:
    seen: list[Exception] = []

    async def hook(exc: Exception) -> None:
        seen.append(exc)

    error_cb = connection_callbacks("svc", hook, closing=lambda: False)["error_cb"]
    refused = ConnectionRefusedError(111, "refused")
    await error_cb(refused)  # returns: nats-py tries again
    assert seen == [refused]


async def test_other_errors_during_our_close_are_not_turned_into_a_cancellation() -> None:
    error_cb = connection_callbacks("svc", closing=lambda: True)["error_cb"]
    await error_cb(ValueError("a permissions violation, say"))


async def test_a_drain_that_times_out_during_our_close_stays_a_drain_timeout() -> None:
    """nats-py reports a drain past its timeout to the error callback from ``drain()`` itself;
    turned into a cancellation it escaped the close's ``suppress(Exception)`` and ended
    ``arcflow dev`` with exit 1 after a complete demo (seen in a fresh-clone run)."""
    from nats.errors import DrainTimeoutError

    seen: list[Exception] = []

    async def hook(exc: Exception) -> None:
        seen.append(exc)

    error_cb = connection_callbacks("svc", hook, closing=lambda: True)["error_cb"]
    timeout = DrainTimeoutError()
    await error_cb(timeout)  # returns: drain() goes on to raise its own timeout
    assert seen == [timeout]
