"""Benchmark: what the services' subscriptions cost while no event arrives, per batch window.

Not a test. FastStream's batch pull loop (ADR 0070) fetches again as soon as a fetch ends, and
an idle fetch ends when its window does, so the window sets how often an idle subscriber asks
the server for messages. This starts one nats-server and the registrar's and the reconciler's
real subscriptions (their ``ServiceSpec``, no state: no event reaches a handler), leaves them
idle for ``--seconds`` and reports the CPU time the benchmark process (both services'
subscribers) and the nats-server spent per second, for each window in ``--windows``, in turn,
``--runs`` times (docs/benchmarks/service-skeleton.md)::

    .venv/bin/python benchmarks/idle_fetch.py --windows 0.05 0.25 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from _stack import loadavg, machine, proc_usage

from arcflow.common.service.inprocess import subscriptions_only
from arcflow.common.service.subscribers import DEFAULT_BATCH_WINDOW_SECONDS
from arcflow.devstack.nats_server import NatsServer


def _server_cpu(pid: int) -> float:
    return proc_usage(pid)[1]


async def idle(window: float, seconds: float) -> dict[str, float]:
    from arcflow.reconciler.service import SERVICE as RECONCILER
    from arcflow.registrar.service import SERVICE as REGISTRAR

    with NatsServer() as server:
        pid = server.pid
        assert pid is not None
        runtimes = [
            await subscriptions_only(server.url, spec, None, fetch_timeout=window)
            for spec in (REGISTRAR, RECONCILER)
        ]
        subscriptions = len(REGISTRAR.subscriptions) + len(RECONCILER.subscriptions)
        try:
            await asyncio.sleep(2.0)  # consumers bound, first fetches out
            cpu0, srv0, t0 = time.process_time(), _server_cpu(pid), time.monotonic()
            await asyncio.sleep(seconds)
            cpu1, srv1, t1 = time.process_time(), _server_cpu(pid), time.monotonic()
        finally:
            for runtime in reversed(runtimes):
                await runtime.stop()
    span = t1 - t0
    return {
        "window_seconds": window,
        "subscriptions": subscriptions,
        "services_cpu_ms_per_s": round((cpu1 - cpu0) / span * 1000, 1),
        "nats_server_cpu_ms_per_s": round((srv1 - srv0) / span * 1000, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=float, nargs="+", default=[0.05, 0.25])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/idle-fetch.json"))
    args = parser.parse_args()
    if max(args.windows) > DEFAULT_BATCH_WINDOW_SECONDS:
        # the runtime's fetch timeout only caps the subscribers' window: a larger one would be
        # measured as the default
        parser.error(f"a window can be at most the default, {DEFAULT_BATCH_WINDOW_SECONDS} s")
    results = []
    for run in range(args.runs):
        for window in args.windows:
            result = {"run": run + 1, **asyncio.run(idle(window, args.seconds))}
            result["load_1m"] = loadavg()[0]
            print(json.dumps(result), flush=True)
            results.append(result)
    doc = {"machine": machine(), "results": results}
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
