"""The skeleton's light parts (used by the listener, ADR 0016): a plain nats-py connection
with the service's inbox prefix and state logs, and SIGTERM/SIGINT handling."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from arcflow.common.nats import NatsConnection
from arcflow.common.service.connection import connect_plain
from arcflow.common.service.signals import run_until_signalled
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

pytestmark = pytest.mark.integration


async def test_plain_connection_uses_the_service_inbox_and_logs_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="arcflow.service.nats")
    with NatsServer() as server:
        nc = await connect_plain(NatsConnection(url=server.url), "listener")
        try:
            assert nc.is_connected
            assert nc._inbox_prefix.decode().startswith("_INBOX_listener")
            server.stop()

            async def warned() -> bool:
                return any("NATS disconnected" in r.getMessage() for r in caplog.records)

            await eventually(warned, within=10)
        finally:
            await nc.close()
    warnings = [r for r in caplog.records if "NATS disconnected" in r.getMessage()]
    assert len(warnings) == 1  # one line per outage, not one per reconnect attempt


async def test_a_signal_sets_the_stop_event() -> None:
    seen: list[str] = []

    async def run(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)
        seen.append("stopped")

    await run_until_signalled(run)
    assert seen == ["stopped"]
    # The handlers are gone afterwards: the default disposition is back.
    assert signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.default_int_handler)
