"""The broker goes away in the middle of a burst: a single nats-server restarts; one node
of a 3-node JetStream cluster (streams and KV buckets with 3 replicas) is SIGKILLed and comes
back, and its replicas catch up with the others."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import figures_after, report, run_burst
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_nats_server_restart_mid_burst(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path) as stack:
        assert stack.nats is not None
        server = stack.nats

        async def restart() -> None:
            await asyncio.to_thread(server.restart)
            for service in stack.services.values():
                await service.wait_healthy()

        began = time.monotonic()
        burst, back_after, last_event = await run_burst(stack, [("nats-server restart", restart)])
        figures = await figures_after(burst, last_event=last_event)
        report("nats-server restart", began, back_after, figures)
        assert figures.restarts == {"watcher": 0, "registrar": 0, "reconciler": 0}
        assert figures.problems() == []


async def test_one_node_of_three_sigkilled_mid_burst(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path, cluster_size=3, auth="app") as stack:
        cluster = stack.cluster
        assert cluster is not None
        down = 0

        async def kill() -> None:
            cluster.kill(down)

        async def revive() -> None:
            await asyncio.to_thread(cluster.revive, down)

        began = time.monotonic()
        # SIGKILL at 1/3 of the burst, the next third runs on two nodes, back at 2/3.
        burst, back_after, last_event = await run_burst(
            stack, [("SIGKILL node 0", kill), ("node 0 started again", revive)]
        )

        async def caught_up() -> bool:
            revived = cluster.stream_replicas(down)
            others = cluster.stream_replicas((down + 1) % cluster.size)
            assert others, "no streams reported"
            for name, state in others.items():
                assert len(state["replicas"]) == cluster.size - 1, f"{name}: {state}"
                assert all(peer.get("current") for peer in state["replicas"]), f"{name}: {state}"
                seen = revived.get(name, {}).get("last_seq")
                assert seen == state["last_seq"], f"{name}: node {down} at {seen}, {state}"
            return True

        await eventually(caught_up, within=10, interval=0.2, what="replicas caught up")
        figures = await figures_after(burst, last_event=last_event)
        report("3-node cluster, SIGKILL one node", began, back_after, figures)
        assert figures.problems() == []
