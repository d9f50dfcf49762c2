"""The Kubernetes client's CPU per request: one connection pool, or requests spread over small
pools (ADR 0116).

Not a test. Starts a real control plane (the cached one of the suite), then, alternating the
layouts in one invocation, sends ``--requests`` GETs with ``--in-flight`` of them at once
through :class:`arcflow.common.kube.KubeClient` while ``--watches`` watches stream on the same
client, and reports the client's CPU per request (this process's CPU time; the server runs
elsewhere) and the wall time. A layout is (request pools, connections per pool); the client's
module constants are set to it before the client is made:

    .venv/bin/python benchmarks/kube_pools.py --runs 3

Results: ``benchmarks/results/kube-pools.json`` (medians and spread per layout).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import wait_quiet
from _stack import loadavg, machine, spread, write_result

from arcflow.common.kube import KubeClient, KubeSettings, transport
from arcflow.devstack.control_plane import ControlPlane

#: (request pools, connections each): before ADR 0116, and after it.
LAYOUTS = {"one pool of 100": (1, 100), "8 pools of 13": (8, 13)}


async def one_run(
    kubeconfig: Path, layout: tuple[int, int], requests: int, in_flight: int, watches: int
) -> dict[str, Any]:
    pools, connections = layout
    transport.REQUEST_POOLS = pools
    transport.REQUEST_POOL_LIMITS = httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=30
    )
    settings = KubeSettings(kubeconfig=str(kubeconfig), qps=1e6, burst=10**6)
    client = await KubeClient.from_settings(settings)

    async def watch(index: int) -> None:
        async with client.watch("ConfigMap", namespace=f"watched-{index}") as stream:
            async for _ in stream:
                pass

    streams = [asyncio.create_task(watch(i)) for i in range(watches)]
    slots = asyncio.Semaphore(in_flight)

    async def get() -> None:
        async with slots:
            await client.get("Namespace", "default")

    await asyncio.gather(*(get() for _ in range(50)))  # connections open before counting
    load = loadavg()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(get() for _ in range(requests)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for task in streams:
        task.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    await client.close()
    return {
        "loadavg_at_start": load,
        "client_cpu_ms_per_request": round(1000 * cpu / requests, 3),
        "wall_seconds": round(wall, 2),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--in-flight", type=int, default=24)
    parser.add_argument("--watches", type=int, default=10)
    parser.add_argument("--max-load", type=float, default=2.5)
    args = parser.parse_args()
    plane = ControlPlane()
    await asyncio.to_thread(plane.start)
    runs: list[dict[str, Any]] = []
    try:
        for index in range(args.runs):
            for name, layout in LAYOUTS.items():
                if args.max_load:
                    wait_quiet(args.max_load)
                result = await one_run(
                    plane.kubeconfig, layout, args.requests, args.in_flight, args.watches
                )
                result.update(run=index + 1, layout=name)
                runs.append(result)
                print(name, result, flush=True)
    finally:
        await asyncio.to_thread(plane.stop)
    summary = {
        name: {
            key: spread([r[key] for r in runs if r["layout"] == name])
            for key in ("client_cpu_ms_per_request", "wall_seconds")
        }
        for name in LAYOUTS
    }
    write_result(
        "kube-pools",
        {
            "machine": machine(),
            "requests": args.requests,
            "in_flight": args.in_flight,
            "watches": args.watches,
            "runs": runs,
            "summary": summary,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
