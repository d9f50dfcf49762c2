"""Benchmark P1: GitHub message -> ERS ``spec.replicas`` visible on a watch, split in hops.

Not a test. Starts nats-server, the Actions simulator and the Kubernetes emulator (in this
process) and one ``python -m arcflow.listener`` for ``--variants`` scale sets. A trickle of
``--samples`` jobs, one every ``--interval`` seconds round-robin over the variants, is
enqueued; a watch on the EphemeralRunnerSets (from this process) records when each ERS first
shows the replica count the job asks for. Per job (wall clock, one machine):

* ``github``: enqueue -> the ``jobs.batch`` carrying it stored in JetStream (the simulator's
  answer to the long poll, the pump's publish and PubAck; JetStream's own timestamp);
* ``listener``: stored -> the ERS change seen on the watch (the pump's decision in its own task
  since ADR 0104, the merge patch, the API server's watch delivery; before it, a worker fetched
  the batch back from JetStream first);
* ``total``: enqueue -> visible.

``--pythonpath`` puts other source trees first, to measure an older version.

    .venv/bin/python benchmarks/listener_latency.py --samples 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nats
import nats.errors
from listener_scale_sets import NAMESPACE, Bench

from arcflow.common.events import JobsBatch, parse_event
from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def stored_times(nats_url: str, subject: str) -> dict[str, float]:
    """job id -> wall time its batch was stored (JetStream's timestamp)."""
    nc = await nats.connect(nats_url)
    out: dict[str, float] = {}
    try:
        sub = await nc.jetstream().subscribe(subject, ordered_consumer=True)
        while True:
            try:
                msg = await sub.next_msg(timeout=1.0)
            except nats.errors.TimeoutError:
                return out
            event = parse_event(msg.data)
            if isinstance(event, JobsBatch):
                stamp = msg.metadata.timestamp.timestamp()
                for job in event.jobs:
                    out.setdefault(str(job.job_id), stamp)
    finally:
        await nc.close()


class Latency(Bench):
    async def measure(
        self, run: int, sim: ActionsSimulator, kube: KubeClient, nats_url: str, kubeconfig: Path
    ) -> dict[str, Any]:
        ars = f"lat{run}"
        token = sim.add_pat()
        ids = await self.prepare(sim, kube, ars, self.args.variants, token)
        (config,) = self.configs(sim, token, ars, ids, "multi")
        config = config.model_copy(update={"log_level": self.args.log_level})
        env = self.listener_env(ars, config, nats_url, kubeconfig)
        seen: dict[tuple[str, int], float] = {}

        async def watch() -> None:
            async with kube.watch("EphemeralRunnerSet", namespace=NAMESPACE) as stream:
                async for event in stream:
                    name = event.object["metadata"]["name"]
                    replicas = int(event.object.get("spec", {}).get("replicas") or 0)
                    for k in range(1, replicas + 1):
                        seen.setdefault((name, k), time.time())

        watcher = asyncio.ensure_future(watch())
        with open(self.tmp / f"{ars}.log", "wb") as log:  # noqa: ASYNC230
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "arcflow.listener", env=env, stdout=log, stderr=log
            )
        enqueued: list[tuple[str, str, int, float]] = []
        try:
            wanted = set(ids.values())
            while {s["id"] for s in sim.snapshot()["scaleSets"] if s["session"]} < wanted:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # initial ticks settle
            names = list(ids)
            counts = dict.fromkeys(names, 0)
            for i in range(self.args.samples):
                ers = names[i % len(names)]
                counts[ers] += 1
                (job_id,) = sim.enqueue_jobs(1, [ers])
                enqueued.append((str(job_id), ers, counts[ers], time.time()))
                await asyncio.sleep(self.args.interval)
            deadline = time.monotonic() + 60
            while any((ers, k) not in seen for _j, ers, k, _t in enqueued):
                if time.monotonic() > deadline:
                    raise TimeoutError("not every replica count became visible")
                await asyncio.sleep(0.05)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 120)
        stored: dict[str, float] = {}
        for ers in ids:
            variant = ers.removeprefix(f"{ars}-")
            stored.update(await stored_times(nats_url, f"arc.jobs.{NAMESPACE}.{ars}.{variant}"))
        hops: dict[str, list[float]] = {"github": [], "listener": [], "total": []}
        for job_id, ers, k, at in enqueued:
            visible = seen[(ers, k)]
            hops["total"].append((visible - at) * 1000)
            if job_id in stored:
                hops["github"].append((stored[job_id] - at) * 1000)
                hops["listener"].append((visible - stored[job_id]) * 1000)
        return {
            name: {
                "n": len(values),
                "p50_ms": round(percentile(values, 50), 1),
                "p95_ms": round(percentile(values, 95), 1),
                "p99_ms": round(percentile(values, 99), 1),
                "max_ms": round(max(values), 1),
            }
            for name, values in hops.items()
            if values
        }

    async def run_all(self) -> list[dict[str, Any]]:
        results = []
        async with self.world(history_limit=1000) as w:
            for run in range(1, self.args.runs + 1):
                result = await self.measure(run, w.sim, w.kube, w.nats_url, w.kubeconfig)
                print(f"  run {run}: {result}", file=sys.stderr, flush=True)
                results.append(result)
        return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--interval", type=float, default=0.3)
    parser.add_argument("--poll-timeout", type=float, default=20.0)
    parser.add_argument("--log-level", default="info", help="the listener's log_level")
    parser.add_argument("--pythonpath", default="")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="benchmarks/results/listener_latency.json")
    args = parser.parse_args(argv)
    args.pythonpath = [p for p in str(args.pythonpath).split(",") if p]
    args.jobs = max(args.samples, 1)  # max_runners in Bench.configs
    return args


def main() -> None:
    args = parse_args()
    with open("/proc/loadavg") as handle:
        load_before = handle.read().split()[:3]
    results = asyncio.run(Latency(args).run_all())
    with open("/proc/loadavg") as handle:
        load_after = handle.read().split()[:3]
    for hop in ("github", "listener", "total"):
        p99 = [r[hop]["p99_ms"] for r in results if hop in r]
        p50 = [r[hop]["p50_ms"] for r in results if hop in r]
        print(
            f"{hop:9s} p50 {statistics.median(p50):7.1f} ms  "
            f"p99 median {statistics.median(p99):7.1f} ms (runs {p99})"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "listener_latency",
                "label": args.label,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "loadavg_before": load_before,
                "loadavg_after": load_after,
                "settings": {
                    k: getattr(args, k)
                    for k in ("variants", "samples", "interval", "poll_timeout", "log_level")
                },
                "runs": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
