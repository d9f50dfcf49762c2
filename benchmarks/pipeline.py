"""P2 and P6: job queued -> runner pod created -> job started, and API calls per runner.

Not a test. Each run builds a fresh stack (``_stack.Stack``: the services as processes, a
counting proxy per Kubernetes client, the example ARS with 3 variants and no runner cap),
waits for the listener's sessions, resets the counters, then queues jobs (1 s each) round-robin
over the variants:

* ``--mode trickle``: one job every ``--interval`` seconds (default 0.5 s, 40 jobs);
* ``--mode burst``: ``--jobs`` jobs at once (default 200).

It waits until every job completed and every EphemeralRunner and runner pod is gone, then
reports the latency percentiles (queued -> the pod that took the job was created; queued ->
job assigned to a runner), for a burst the time until all runner pods existed, the
Kubernetes API calls per runner lifecycle by client, verb and resource (P6), the JetStream
messages per job and the services' RSS/CPU. Three runs by default; results in
``benchmarks/results/pipeline-<mode>.json``.

    .venv/bin/python benchmarks/pipeline.py --mode trickle
    .venv/bin/python benchmarks/pipeline.py --mode burst
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import Stack, machine, spread, write_result

from arcflow.devstack.demo import percentile


def varz(stack: Stack) -> dict[str, Any]:
    assert stack.nats is not None
    with urllib.request.urlopen(f"{stack.nats.monitor_url}/jsz?streams=true", timeout=5) as r:  # noqa: S310
        jsz = json.load(r)
    with urllib.request.urlopen(f"{stack.nats.monitor_url}/varz", timeout=5) as r:  # noqa: S310
        v = json.load(r)
    streams: dict[str, int] = {}
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            streams[stream["name"]] = int(stream["state"]["last_seq"])
    return {"in_msgs": int(v["in_msgs"]), "streams": streams}


async def one_run(mode: str, jobs: int, interval: float, env: dict[str, str]) -> dict[str, Any]:
    async with Stack(env=env) as stack:
        await stack.wait_ready()
        await asyncio.sleep(2.0)  # let the start-up reconciles settle before counting
        stack.reset_counts()
        before = varz(stack)
        usage_before = stack.usage()
        assert stack.simulator is not None
        assert stack.pod_runner is not None
        queued: dict[str, float] = {}
        started = time.time()
        for index in range(jobs):
            target = stack.targets[index % len(stack.targets)]
            job_id = stack.simulator.enqueue_job(target.job_labels, duration=1.0)
            queued[job_id] = time.time()
            if mode == "trickle":
                await asyncio.sleep(interval)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            states = [stack.simulator.engine.job(j).state.value for j in queued]
            if all(s == "completed" for s in states):
                break
            await asyncio.sleep(0.25)
        else:
            raise TimeoutError("jobs did not complete")
        await stack.wait_drained()
        await asyncio.sleep(1.0)
        after = varz(stack)
        usage_after = stack.usage()
        runner_pods = [r for r in stack.pod_runner.records.values() if r.kind == "runner"]
        pod_of_job = {r.job_id: r.seen_at for r in runner_pods if r.job_id}
        to_pod = [pod_of_job[j] - t for j, t in queued.items() if j in pod_of_job]
        to_start = []
        for job_id, t in queued.items():
            assigned = stack.simulator.engine.job(job_id).runner_assign_time
            if assigned is not None:
                to_start.append(assigned.timestamp() - t)
        counts = stack.counts()
        totals = {client: sum(v.values()) for client, v in counts.items()}
        arcflow_calls = sum(n for c, n in totals.items() if c != "kubelet")
        streams = {
            name: seq - before["streams"].get(name, 0) for name, seq in after["streams"].items()
        }
        return {
            "jobs": jobs,
            "runner_pods": len(runner_pods),
            "queued_to_pod": {
                "p50": percentile(to_pod, 0.5),
                "p95": percentile(to_pod, 0.95),
                "p99": percentile(to_pod, 0.99),
                "max": max(to_pod) if to_pod else None,
            },
            "queued_to_started": {
                "p50": percentile(to_start, 0.5),
                "p95": percentile(to_start, 0.95),
                "p99": percentile(to_start, 0.99),
            },
            "all_pods_created_after_first_enqueue": max(r.seen_at for r in runner_pods) - started
            if runner_pods
            else None,
            "api_calls": counts,
            "api_calls_by_client": totals,
            "api_calls_per_runner_arcflow": arcflow_calls / max(1, len(runner_pods)),
            "api_calls_per_runner_by_client": {
                c: round(n / max(1, len(runner_pods)), 2) for c, n in totals.items()
            },
            "jetstream_messages_per_job": {
                name: round(n / jobs, 2) for name, n in sorted(streams.items()) if n
            },
            "nats_in_msgs_per_job": round((after["in_msgs"] - before["in_msgs"]) / jobs, 1),
            "cpu_seconds_during_run": {
                name: round(usage_after[name]["cpu_seconds"] - usage_before[name]["cpu_seconds"], 2)
                for name in usage_after
            },
            "rss_mib_after": {name: usage_after[name]["rss_mib"] for name in usage_after},
        }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def pick(path: tuple[str, ...]) -> list[float]:
        values = []
        for run in runs:
            value: Any = run
            for part in path:
                value = value[part]
            values.append(float(value))
        return values

    return {
        "queued_to_pod_p50": spread(pick(("queued_to_pod", "p50"))),
        "queued_to_pod_p95": spread(pick(("queued_to_pod", "p95"))),
        "queued_to_pod_p99": spread(pick(("queued_to_pod", "p99"))),
        "queued_to_started_p95": spread(pick(("queued_to_started", "p95"))),
        "api_calls_per_runner_arcflow": spread(pick(("api_calls_per_runner_arcflow",))),
        "all_pods_created_after_first_enqueue": spread(
            pick(("all_pods_created_after_first_enqueue",))
        ),
        "runner_pods_equal_jobs": all(r["runner_pods"] == r["jobs"] for r in runs),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("trickle", "burst"), default="trickle")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="", help="suffix of the result file (e.g. before)")
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for every service (repeatable)"
    )
    args = parser.parse_args()
    jobs = args.jobs or (40 if args.mode == "trickle" else 200)
    env = dict(item.split("=", 1) for item in args.env)
    info = machine()
    runs = []
    for index in range(args.runs):
        result = await one_run(args.mode, jobs, args.interval, env)
        runs.append(result)
        print(
            f"run {index + 1}: pods {result['runner_pods']}/{jobs} "
            f"queued->pod p50 {result['queued_to_pod']['p50']:.2f}s "
            f"p95 {result['queued_to_pod']['p95']:.2f}s "
            f"all pods {result['all_pods_created_after_first_enqueue']:.1f}s "
            f"api/runner {result['api_calls_per_runner_arcflow']:.1f} "
            f"{result['api_calls_per_runner_by_client']}",
            flush=True,
        )
    with open("/proc/loadavg") as handle:  # noqa: ASYNC230
        info["loadavg_at_end"] = [float(x) for x in handle.read().split()[:3]]
    payload = {
        "mode": args.mode,
        "jobs": jobs,
        "interval": args.interval,
        "env": env,
        "machine": info,
        "summary": summarize(runs),
        "runs": runs,
    }
    name = f"pipeline-{args.mode}" + (f"-{args.label}" if args.label else "")
    print(json.dumps(payload["summary"], indent=2))
    print(f"written to {write_result(name, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
