"""One node of a 3-node JetStream cluster (streams and KV buckets with 3 replicas) is SIGKILLed
in the middle of a burst, the burst goes on with two, the node comes back and its replicas
catch up with the others. (A single nats-server's restart is in test_restarts.py.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import figures_after, report, run_burst
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_one_node_of_three_sigkilled_mid_burst(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube, cluster_size=3, auth="app") as stack:
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
            """Every stream (KV buckets included) has three peers and the revived node holds
            the same last sequence as the stream leader."""
            leaders = {}
            for index in range(cluster.size):
                for name, state in cluster.stream_replicas(index).items():
                    if state["leader"] == cluster.nodes[index].server_name:
                        leaders[name] = state
            revived = cluster.stream_replicas(down)
            assert leaders, "no stream leader reported"
            for name, state in leaders.items():
                assert len(state["replicas"]) == cluster.size - 1, f"{name}: {state}"
                seen = revived.get(name, {}).get("last_seq")
                assert seen == state["last_seq"], f"{name}: node {down} at {seen}, {state}"
            return True

        await eventually(caught_up, within=10, interval=0.2, what="replicas caught up")
        figures = await figures_after(burst, last_event=last_event)
        report("3-node cluster, SIGKILL one node", began, back_after, figures)
        assert figures.problems() == []
