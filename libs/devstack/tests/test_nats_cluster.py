"""The 3-node JetStream cluster launcher: arcflow's layout with 3 replicas on it, a node
SIGKILLed and started again, its replicas catching up."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from arcflow.common.nats import KV_SCALESETS, STREAM_JOBS, ensure_jetstream, ensure_stream
from arcflow.devstack.nats_cluster import NatsCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_layout_with_three_replicas_survives_a_node_and_catches_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_REPLICAS", "3")
    with NatsCluster(size=3) as cluster:
        assert len(cluster.servers) == 3
        assert cluster.meta_leader() is not None
        client = await nats.connect(servers=cluster.servers, max_reconnect_attempts=-1)
        try:
            js = client.jetstream(timeout=10)
            await ensure_jetstream(js)
            assert (await js.stream_info(STREAM_JOBS.name)).config.num_replicas == 3
            kv = await js.stream_info(f"KV_{KV_SCALESETS.bucket}")
            assert kv.config.num_replicas == 3
            consumer = await js.consumer_info("ARC_K8S", "registrar-ars")
            assert consumer.cluster is not None
            assert len(consumer.cluster.replicas or []) == 2  # leader + 2 followers

            monkeypatch.delenv("ARCFLOW_NATS_REPLICAS")
            await ensure_stream(js, STREAM_JOBS)  # a process without the setting
            assert (await js.stream_info(STREAM_JOBS.name)).config.num_replicas == 3

            down = next(i for i, n in enumerate(cluster.nodes) if n.url != client.connected_url)
            cluster.kill(down)
            for index in range(20):  # two of three nodes: still a quorum
                await _publish_retrying(js, str(index).encode())
            cluster.revive(down)
            deadline = time.monotonic() + 20
            while True:
                seen = cluster.stream_replicas(down).get(STREAM_JOBS.name, {}).get("last_seq")
                if seen == 20:
                    break
                assert time.monotonic() < deadline, f"node {down} at {seen} of 20"
                await asyncio.sleep(0.1)
        finally:
            await client.close()
    assert all(not node.running for node in cluster.nodes)


async def _publish_retrying(js: JetStreamContext, data: bytes) -> None:
    """A stream whose leader was on the killed node has none until the others elect one."""
    deadline = time.monotonic() + 15
    while True:
        try:
            await js.publish("arc.jobs.ns.ars.v", data, timeout=2)
            return
        except (NatsError, TimeoutError):
            assert time.monotonic() < deadline, "no stream leader elected within 15 s"
            await asyncio.sleep(0.1)
