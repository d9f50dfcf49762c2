"""One trigger (ADR 0069): the reconciler fed by the watcher's stream and its own watch, against
its own watch only, in turn on fresh real control planes in one invocation.

Not a test. ``before`` runs the watcher, registrar and reconciler from an older source tree
(``--before-src``, default: this checkout's ``main`` exported to a temp folder, put first on the
services' ``PYTHONPATH``); ``after`` runs this checkout. Each run builds a fresh stack
(``_stack.Stack``: a real kube-apiserver, etcd and kube-controller-manager, each service as its
chart's ServiceAccount, the example ARS with 3 variants), waits for the listener's sessions,
then queues ``--jobs`` jobs one every ``--interval`` seconds and waits until every runner is
gone. It reports:

* **watches**: the API server's own ``apiserver_longrunning_requests{verb="WATCH"}`` by
  resource once the stack is up (the cluster's total, kube-controller-manager's included), and
  the watches open through the counting proxy per client at the end of the run (watcher,
  registrar, reconciler, listener: one reconciler replica's share is its row); requests and
  409 answers per arcflow identity from the audit log;
* **change -> reconcile**: an EphemeralRunnerSet ``patchID`` first seen on this harness's own
  watch -> the first EphemeralRunner of that patch seen on the same kind of watch (the
  reconcile's write visible);
* **stream hop**: an ERS change seen on this harness's watch -> the watcher's
  ``k8s.object.changed`` for the same resourceVersion delivered here over NATS (what the stream
  path adds before its reconcile can even start);
* **JetStream messages the reconciler consumed** (its durables' delivered counts) and its
  **reconcile passes** (``arcflow_reconciler_reconciles``), per runner; the reconciler's 409s
  from the audit log;
* the services' **RSS** and CPU seconds, and the machine's load at the start and end of a run.

    .venv/bin/python benchmarks/one_trigger.py --runs 2
    .venv/bin/python benchmarks/one_trigger.py --before-src /path/to/old/checkout
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nats
from _stack import CONTROLLER_NAMESPACE, ROOT, Stack, loadavg, machine, spread, write_result
from prometheus_client.parser import text_string_to_metric_families

from arcflow.common.constants import ANNOTATION_PATCH_ID
from arcflow.common.events import K8sObjectChanged, parse_event
from arcflow.common.kube import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.demo import percentile

#: The reconciler's durables before and after ADR 0069 (``reconciler-k8s`` only before).
DURABLES = (
    ("ARC_K8S", "reconciler-k8s"),
    ("ARC_SCALESETS", "reconciler-scalesets"),
    ("ARC_ERRORS", "reconciler-errors"),
)
RECONCILER_USER = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:arcflow-reconciler"


def export_tree(rev: str) -> Path:
    """``rev``'s ``libs`` and ``services`` in a temp folder (read only, never built)."""
    target = Path(tempfile.mkdtemp(prefix="arcflow-before-"))
    archive = subprocess.run(
        ["git", "archive", rev, "libs", "services"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def pythonpath(tree: Path) -> str:
    return ":".join(str(p) for p in [*tree.glob("libs/*/src"), *tree.glob("services/*/src")])


def open_watches(plane: ControlPlane) -> dict[str, int]:
    """``apiserver_longrunning_requests{verb="WATCH"}`` summed by resource (the server's own
    gauge of the watches open now, every client included)."""
    creds = plane.credentials
    context = ssl.create_default_context(cafile=str(creds.ca))
    context.load_cert_chain(str(creds.admin_cert), str(creds.admin_key))
    with urllib.request.urlopen(f"{plane.url}/metrics", timeout=10, context=context) as r:  # noqa: S310
        text = r.read().decode()
    by_resource: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_longrunning_requests":
            continue
        for sample in family.samples:
            if sample.labels.get("verb") == "WATCH":
                by_resource[sample.labels.get("resource") or "?"] += int(sample.value)
    return dict(sorted(by_resource.items()))


def reconciles(stack: Stack) -> float:
    """``arcflow_reconciler_reconciles`` summed over kinds, from the reconciler's endpoint."""
    assert stack.parts is not None
    port = stack.parts.services["reconciler"].process.metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name.startswith("arcflow_reconciler_reconciles"):
            total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


async def delivered(stack: Stack) -> dict[str, int]:
    """Messages delivered so far to each of the reconciler's durables that exist."""
    assert stack.nats is not None
    nc = await nats.connect(stack.nats.url)
    try:
        js = nc.jetstream()
        out = {}
        for stream, durable in DURABLES:
            try:
                info = await js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                continue
            out[durable] = int(info.delivered.consumer_seq or 0) if info.delivered else 0
        return out
    finally:
        await nc.close()


def audit_by_user(plane: ControlPlane, since: float) -> dict[str, Counter[str]]:
    """Per user: requests and ``409`` answers since ``since`` (the audit log has one line per
    finished request; a watch is logged when it ends, so open watches are not in it)."""
    out: dict[str, Counter[str]] = {}
    for line in plane.audit_log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        stamp = str(event.get("requestReceivedTimestamp") or "1970-01-01T00:00:00Z")
        if datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() < since:
            continue
        counts = out.setdefault(str((event.get("user") or {}).get("username") or "?"), Counter())
        counts["requests"] += 1
        if (event.get("responseStatus") or {}).get("code") == 409:
            counts["409"] += 1
    return out


class Clocks:
    """This harness's watches of ERSs and runners and its NATS subscription to ``arc.k8s``."""

    def __init__(self) -> None:
        self.patch_seen: dict[tuple[str, int], float] = {}  # (ers, patchID) -> first seen
        self.first_runner: dict[tuple[str, int], float] = {}  # (ers, patchID) -> first ER
        self.ers_version_seen: dict[tuple[str, str], float] = {}  # (ers, rv) -> watch
        self.ers_version_streamed: dict[tuple[str, str], float] = {}  # (ers, rv) -> NATS
        self.runners: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, stack: Stack) -> None:
        assert stack.nats is not None
        self.nc = await nats.connect(stack.nats.url)

        async def on_change(msg: Any) -> None:
            now = time.time()
            with contextlib.suppress(Exception):
                event = parse_event(msg.data)
                if isinstance(event, K8sObjectChanged):
                    key = (event.name, event.resource_version)
                    self.ers_version_streamed.setdefault(key, now)

        await self.nc.subscribe("arc.k8s.ephemeralrunnersets.>", cb=on_change)
        self._tasks.append(asyncio.create_task(self._watch_sets(stack)))
        self._tasks.append(asyncio.create_task(self._watch_runners(stack)))

    async def _watch_sets(self, stack: Stack) -> None:
        assert stack.kube is not None
        version = (await stack.kube.list(EPHEMERAL_RUNNER_SET)).resource_version
        while True:
            async with stack.kube.watch(EPHEMERAL_RUNNER_SET, resource_version=version) as stream:
                async for event in stream:
                    now = time.time()
                    version = event.resource_version or version
                    meta = event.object.get("metadata") or {}
                    name = str(meta.get("name"))
                    self.ers_version_seen.setdefault((name, str(meta.get("resourceVersion"))), now)
                    patch = int((event.object.get("spec") or {}).get("patchID") or 0)
                    self.patch_seen.setdefault((name, patch), now)

    async def _watch_runners(self, stack: Stack) -> None:
        assert stack.kube is not None
        version = (await stack.kube.list(EPHEMERAL_RUNNER)).resource_version
        while True:
            async with stack.kube.watch(EPHEMERAL_RUNNER, resource_version=version) as stream:
                async for event in stream:
                    now = time.time()
                    version = event.resource_version or version
                    meta = event.object.get("metadata") or {}
                    name = str(meta.get("name"))
                    if name in self.runners:
                        continue
                    self.runners.add(name)
                    owners = meta.get("ownerReferences") or [{}]
                    patch = int((meta.get("annotations") or {}).get(ANNOTATION_PATCH_ID) or 0)
                    self.first_runner.setdefault((str(owners[0].get("name")), patch), now)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.nc.close()

    def change_to_reconcile(self) -> list[float]:
        return [
            t - self.patch_seen[key]
            for key, t in self.first_runner.items()
            if key in self.patch_seen and t >= self.patch_seen[key]
        ]

    def stream_hop(self) -> list[float]:
        return [
            t - self.ers_version_seen[key]
            for key, t in self.ers_version_streamed.items()
            if key in self.ers_version_seen
        ]


def _ms(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_ms": round(1000 * (percentile(values, 0.5) or 0.0), 1) if values else None,
        "p95_ms": round(1000 * (percentile(values, 0.95) or 0.0), 1) if values else None,
        "max_ms": round(1000 * max(values), 1) if values else None,
    }


async def one_run(side: str, env: dict[str, str], jobs: int, interval: float) -> dict[str, Any]:
    load_at_start = loadavg()
    async with Stack(env=env, kube_backend="apiserver", identities=True) as stack:
        assert stack.parts is not None
        plane = stack.parts.control_plane
        assert plane is not None
        assert stack.simulator is not None
        await stack.wait_ready()
        await asyncio.sleep(2.0)  # the start-up reconciles settle
        stack.reset_counts()
        since = time.time()
        watches_all = open_watches(plane)  # before this harness opens its own
        delivered_before, reconciles_before = await delivered(stack), reconciles(stack)
        usage_before = stack.usage()
        clocks = Clocks()
        await clocks.start(stack)
        queued = []
        for index in range(jobs):
            target = stack.targets[index % len(stack.targets)]
            queued.append(stack.simulator.enqueue_job(target.job_labels, duration=1.0))
            await asyncio.sleep(interval)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if all(stack.simulator.engine.job(j).state.value == "completed" for j in queued):
                break
            await asyncio.sleep(0.25)
        else:
            raise TimeoutError("jobs did not complete")
        await stack.wait_drained()
        await asyncio.sleep(1.0)
        await clocks.stop()
        delivered_after, reconciles_after = await delivered(stack), reconciles(stack)
        usage = stack.usage()
        audit = audit_by_user(plane, since)
        assert stack.proxy is not None
        by_client = stack.proxy.open_watches()
        runners = max(1, len(clocks.runners))
        consumed = {d: n - delivered_before.get(d, 0) for d, n in delivered_after.items()}
        arcflow_users = {
            u.rsplit(":", 1)[1]: dict(c)
            for u, c in audit.items()
            if u.startswith(f"system:serviceaccount:{CONTROLLER_NAMESPACE}:arcflow-")
        }
        return {
            "side": side,
            "loadavg_at_start": load_at_start,
            "loadavg_at_end": loadavg(),
            "jobs": jobs,
            "runners": len(clocks.runners),
            "watches_open_cluster_total": sum(watches_all.values()),
            "watches_open_cluster_by_resource": watches_all,
            "watches_open_arcflow": sum(sum(c.values()) for c in by_client.values()),
            "watches_open_by_client": by_client,
            "watches_open_reconciler_replica": sum(by_client.get("reconciler", {}).values()),
            "audit_by_arcflow_identity": arcflow_users,
            "reconciler_409": audit.get(RECONCILER_USER, Counter()).get("409", 0),
            "reconciler_requests_per_runner": round(
                audit.get(RECONCILER_USER, Counter()).get("requests", 0) / runners, 2
            ),
            "change_to_reconcile": _ms(clocks.change_to_reconcile()),
            "stream_hop": _ms(clocks.stream_hop()),
            "jetstream_consumed_by_reconciler": consumed,
            "jetstream_consumed_per_runner": round(sum(consumed.values()) / runners, 2),
            "reconciles_per_runner": round((reconciles_after - reconciles_before) / runners, 2),
            "rss_mib": {n: u["rss_mib"] for n, u in usage.items()},
            "cpu_seconds_during_run": {
                n: round(u["cpu_seconds"] - usage_before.get(n, u)["cpu_seconds"], 2)
                for n, u in usage.items()
            },
        }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def pick(side: str, *path: str) -> list[float]:
        out = []
        for run in runs:
            if run["side"] != side:
                continue
            value: Any = run
            for part in path:
                value = value[part]
            if value is not None:
                out.append(float(value))
        return out

    figures = {
        "watches_open_cluster_total": ("watches_open_cluster_total",),
        "watches_open_arcflow": ("watches_open_arcflow",),
        "watches_open_reconciler_replica": ("watches_open_reconciler_replica",),
        "change_to_reconcile_p50_ms": ("change_to_reconcile", "p50_ms"),
        "change_to_reconcile_p95_ms": ("change_to_reconcile", "p95_ms"),
        "stream_hop_p50_ms": ("stream_hop", "p50_ms"),
        "stream_hop_p95_ms": ("stream_hop", "p95_ms"),
        "jetstream_consumed_per_runner": ("jetstream_consumed_per_runner",),
        "reconciles_per_runner": ("reconciles_per_runner",),
        "reconciler_409": ("reconciler_409",),
        "reconciler_requests_per_runner": ("reconciler_requests_per_runner",),
        "reconciler_rss_mib": ("rss_mib", "reconciler"),
        "reconciler_cpu_seconds": ("cpu_seconds_during_run", "reconciler"),
    }
    return {
        side: {
            name: spread(values) if (values := pick(side, *path)) else None
            for name, path in figures.items()
        }
        for side in ("before", "after")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per side, alternated")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--before-src", type=Path, default=None, help="an older checkout")
    parser.add_argument("--before-rev", default="main", help="exported when no --before-src")
    args = parser.parse_args()
    before = args.before_src or export_tree(args.before_rev)
    before_rev = subprocess.run(
        ["git", "rev-parse", "--short", args.before_rev], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    envs = {"before": {"PYTHONPATH": pythonpath(before)}, "after": {}}
    info = machine()
    runs = asyncio.run(run_all(args.runs, envs, args.jobs, args.interval))
    summary = summarize(runs)
    print(json.dumps(summary, indent=2))
    path = write_result(
        "one-trigger",
        {
            "machine": info,
            "before": str(args.before_src or f"{args.before_rev} ({before_rev})"),
            "args": vars(args) | {"before_src": str(before)},
            "summary": summary,
            "runs": runs,
        },
    )
    print(f"wrote {path}")
    return 0


async def run_all(
    count: int, envs: dict[str, dict[str, str]], jobs: int, interval: float
) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for index in range(count):
        for side in ("before", "after"):
            print(f"run {index + 1}/{count} {side} (load {loadavg()})", flush=True)
            run = await one_run(side, envs[side], jobs, interval)
            runs.append(run)
            print(json.dumps(run), flush=True)
    return runs


if __name__ == "__main__":
    sys.exit(main())
