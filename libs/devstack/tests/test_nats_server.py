"""The dev stack's nats-server launcher starts a real, healthy broker and cleans up after itself."""

from __future__ import annotations

import os

import nats
import pytest

from arcflow.devstack.nats_server import NatsServer, free_ports

pytestmark = pytest.mark.integration


async def test_jetstream_round_trip_survives_restart() -> None:
    server = NatsServer().start()
    store = server.store_dir
    try:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="PROBE", subjects=["probe.>"])
        ack = await js.publish("probe.one", b"hello")
        assert ack.seq == 1
        await nc.close()

        server.restart()
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        info = await js.stream_info("PROBE")
        assert info.state.messages == 1, "file storage must survive a broker restart"
        msg = await js.get_msg("PROBE", 1)
        assert msg.data == b"hello"
        await nc.close()
    finally:
        server.stop()
    assert store is not None
    assert not os.path.exists(store)
    assert not server.running


def test_free_ports_are_distinct_while_chosen() -> None:
    ports = free_ports(64)
    assert len(set(ports)) == 64, "a port was given twice"
    assert all(0 < p < 65536 for p in ports)


def test_a_server_with_one_port_fixed_gets_another_for_its_monitor() -> None:
    (fixed,) = free_ports(1)
    server = NatsServer(port=fixed).start()
    try:
        assert server.port == fixed
        assert server.monitor_port not in (0, fixed)
        assert server.running
    finally:
        server.stop()
