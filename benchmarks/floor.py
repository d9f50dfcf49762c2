"""The floor of the runner pipeline (issue #31, goal 0): N runner lifecycles' Kubernetes
writes by one plain admin client on a fresh control plane with the pod runner only.

Not a test. Each run brings up a fresh control plane (etcd, kube-apiserver,
kube-controller-manager, the CRDs; ``--kube emulator``: the API emulator) and the pod runner,
without any arcflow service, then runs ``_floor.floor_run``: for ``--jobs`` runners over the 3
variants of examples/02-runner-variants.yaml, the EphemeralRunner, its JIT Secret and Pod, the
pod runner's binding and statuses, the runner's status patches and the deletes, as fast as the
server takes them. ``floor_seconds`` (first write -> the pod runner saw every runner pod) is
what ``pipeline.py --mode burst`` reports each run's ``all_pods_created_after_first_enqueue``
against (docs/benchmarks/floor.md).

    .venv/bin/python benchmarks/floor.py --jobs 600 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _floor import DEFAULT_CONCURRENCY, commit, measure_floor
from _report import wait_quiet
from _stack import loadavg, machine, spread, write_result

SPREAD_FIELDS = (
    "floor_seconds",
    "pods_created_seconds",
    "pods_running_seconds",
    "all_deleted_seconds",
    "api_calls_floor_per_runner",
)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SPREAD_FIELDS:
        values = [float(r[name]) for r in runs if r.get(name) is not None]
        out[name] = spread(values) if values else None
    out["loadavg_at_start"] = [r["loadavg_at_start"][0] for r in runs]
    out["pods_seen_equal_jobs"] = all(r["pods_seen"] == r["jobs"] for r in runs)
    out["errors"] = sum(r["errors"] for r in runs)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="requests in flight of the floor's client at most",
    )
    parser.add_argument(
        "--job-seconds", type=float, default=1.0, help="how long each pod stays Running"
    )
    parser.add_argument(
        "--listener-writes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the listener's two writes per runner (job started, job completed)",
    )
    parser.add_argument(
        "--client-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the floor's client in a process of its own (default), or in this one beside "
        "the pod runner (--no-client-process, the first figures' way)",
    )
    parser.add_argument("--kube", choices=("apiserver", "emulator"), default="apiserver")
    parser.add_argument("--label", default="", help="suffix of the result file")
    parser.add_argument(
        "--max-load",
        type=float,
        default=2.5,
        help="wait (up to 10 min) before each run until the 1-minute load is under this; 0: no",
    )
    args = parser.parse_args()
    info = machine() | commit()
    runs = []
    for index in range(args.runs):
        if args.max_load:
            wait_quiet(args.max_load)
        result = await measure_floor(
            args.jobs,
            kube_backend=args.kube,
            variants=args.variants,
            concurrency=args.concurrency,
            job_seconds=args.job_seconds,
            listener_writes=args.listener_writes,
            client_process=args.client_process,
        )
        runs.append(result)
        print(
            f"run {index + 1} (load {result['loadavg_at_start'][0]}): "
            f"pods seen {result['pods_seen']}/{args.jobs}, "
            f"floor {result['floor_seconds']}s, running {result['pods_running_seconds']}s, "
            f"all deleted {result['all_deleted_seconds']}s, "
            f"calls/runner {result['api_calls_floor_per_runner']}, errors {result['errors']}",
            flush=True,
        )
    info["loadavg_at_end"] = loadavg()
    payload = {
        "benchmark": "floor",
        "kube": args.kube,
        "jobs": args.jobs,
        "variants": args.variants,
        "concurrency": args.concurrency,
        "job_seconds": args.job_seconds,
        "listener_writes": args.listener_writes,
        "client_process": args.client_process,
        "machine": info,
        "commit": info["commit"],
        "summary": summarize(runs),
        "runs": runs,
    }
    name = f"floor-{args.kube}-{args.jobs}" + (f"-{args.label}" if args.label else "")
    print(json.dumps(payload["summary"], indent=2))
    print(f"written to {write_result(name, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
