"""arcflow on a real node, installed with helm as a user installs it (issue #30 item 7;
docs/benchmarks/node.md).

Each run starts a fresh node (:class:`arcflow.devstack.node.Node`: control plane, containerd,
kubelet, kube-proxy, CoreDNS), then measures:

1. **helm install -> every session open**: ``helm install`` of the umbrella chart and NATS
   (:mod:`arcflow.devstack.node.release`), the services' pods Ready, ``helm install`` of the
   runner-set chart with three variants, until the simulator holds a message session for every
   scale set (``seconds_until``: ``services_ready``, ``scale_sets``, ``sessions``).
2. **queued -> runner pod Running** per job, for a trickle (one job every ``--trickle-interval``
   s) and a burst (``--burst`` jobs at once over the three variants), split into arcflow's share
   (job queued -> the runner pod that took it created) and the node's (pod created -> its
   container running: sandbox, network, container start), p50 and p95; for the burst also
   ``all_pods_created_after_first_enqueue`` (every runner pod created).
3. **Resources of each pod** (the services, NATS, the listener) from the kubelet's
   ``/stats/summary`` through the API server: working set and CPU seconds over the burst, beside
   the requests and limits of the pod's spec.

The Actions simulator runs in this process, published on the node's address (ADR 0112); pod
times are when this process's Pod watch saw them (wall clock). Needs root and the node's parts
(``ARCFLOW_NODE_DIR`` or ``scripts/node.sh``) and the images (``scripts/build-images.sh``;
``ARCFLOW_NO_IMAGES=1``: as they are).

    .venv/bin/python benchmarks/node.py --runs 3 --trickle 20 --burst 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import loadavg, wait_quiet, write_runs

from arcflow.common.kube import POD, KubeClient, KubeSettings
from arcflow.common.quantity import parse_quantity
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.node import Node, release
from arcflow.devstack.node.stack import NodePods

RUNNERS = "arc-runners"
VARIANTS = ("cpu-small", "cpu-large", "gpu")


@dataclass
class Phase:
    """One workload's jobs: per-job seconds, split."""

    jobs: int = 0
    completed: int = 0
    total_p50: float | None = None
    total_p95: float | None = None
    arcflow_p50: float | None = None
    arcflow_p95: float | None = None
    node_p50: float | None = None
    node_p95: float | None = None
    all_pods_created_after_first_enqueue: float | None = None
    seconds: float = 0.0


@dataclass
class Run:
    index: int
    loadavg_at_start: list[str]
    node_start_seconds: float = 0.0
    seconds_until: dict[str, float] = field(default_factory=dict)
    trickle: Phase = field(default_factory=Phase)
    burst: Phase = field(default_factory=Phase)
    #: pod role -> {rss_mib_after, working_set_mib_peak, cpu_seconds_during_run, requests, limits}
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)


def runner_set_values(
    images: dict[str, str], config_url: str, token: str, max_runners: int
) -> dict[str, Any]:
    """Three variants, each its own labels, on the runner image; 1m CPU a runner so that a
    200-job burst fits the node's 2 CPUs of requests."""
    template = release.runner_template(images["runner"], cpu="1m")
    return {
        "githubConfigUrl": config_url,
        "githubConfigSecret": {"github_token": token},
        "scaleSetLabels": ["linux"],
        "minRunners": 0,
        "maxRunners": max_runners,
        "template": template,
        "runnerVariants": [
            {"name": v, "runnerScaleSetLabels": [f"{RUNNERS}-{v}"]} for v in VARIANTS
        ],
    }


class Bench:
    def __init__(self, images: dict[str, str], args: argparse.Namespace, index: int) -> None:
        self.images = images
        self.args = args
        self.run = Run(index=index, loadavg_at_start=loadavg())
        self.pods = NodePods()
        self.folder = Path(tempfile.mkdtemp(prefix="arcflow-bench-node-"))

    async def measure(self) -> Run:
        began = time.monotonic()
        node = Node(images=[self.images[n] for n in release.IMAGE_NAMES], crds=[])
        try:
            await asyncio.to_thread(node.start)
            self.run.node_start_seconds = round(time.monotonic() - began, 2)
            await self._on(node)
        finally:
            await asyncio.to_thread(node.stop)
        return self.run

    async def _on(self, node: Node) -> None:
        until = self.run.seconds_until
        t0 = time.monotonic()
        await asyncio.to_thread(release.install, node, self.images, self.folder / "helm")
        await asyncio.to_thread(release.wait_ready, node, (*release.SERVICES, "nats"), 300)
        until["services_ready"] = round(time.monotonic() - t0, 2)
        simulator = ActionsSimulator(poll_timeout=50.0)
        await simulator.start()
        kube = await KubeClient.from_settings(
            KubeSettings(kubeconfig=str(node.control_plane.kubeconfig))
        )
        watch = asyncio.create_task(self._watch(kube))
        try:
            simulator.advertise_url = f"http://{node.netns.node_ip}:{simulator.port}"
            await asyncio.to_thread(node.netns.publish, simulator.port)
            values = runner_set_values(
                self.images, simulator.config_url("example-org"), simulator.add_pat(),
                self.args.max_runners,
            )  # fmt: skip
            path = self.folder / "runners.yaml"
            path.write_text(yaml.safe_dump(values))
            chart = release.charts_dir() / "arcflow-runner-set"
            install = ("install", RUNNERS, str(chart), "-n", RUNNERS, "--create-namespace")
            await asyncio.to_thread(release.helm, node, *install, "-f", str(path))
            await self._until(
                lambda: simulator.stats()["scale_sets"] >= len(VARIANTS), 300, "scale sets"
            )
            until["scale_sets"] = round(time.monotonic() - t0, 2)
            await self._until(
                lambda: simulator.stats().get("sessions", 0) >= len(VARIANTS), 300, "sessions"
            )
            until["sessions"] = round(time.monotonic() - t0, 2)
            self.run.trickle = await self._trickle(simulator)
            before = await self._stats(kube, node)
            peaks: dict[str, float] = {}
            sampler = asyncio.create_task(self._sample(kube, node, peaks))
            try:
                self.run.burst = await self._burst(simulator)
            finally:
                sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampler
            after = await self._stats(kube, node)
            self.run.pods = await self._footprint(kube, before, after, peaks)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
            await kube.close()
            await simulator.stop()

    async def _watch(self, kube: KubeClient) -> None:
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    listed = await kube.list(POD)
                    for pod in listed.items:
                        self.pods.observe("ADDED", pod)
                    resource_version = listed.resource_version
                stream = kube.watch(POD, resource_version=resource_version)
                async with stream:
                    async for event in stream:
                        resource_version = event.resource_version or resource_version
                        self.pods.observe(event.type, event.object)
            except asyncio.CancelledError:
                raise
            except Exception:
                resource_version = None
                await asyncio.sleep(0.2)

    @staticmethod
    async def _until(check: Any, within: float, what: str) -> None:
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {within:.0f}s")
            await asyncio.sleep(0.1)

    def _enqueue(self, simulator: ActionsSimulator, index: int) -> str:
        variant = VARIANTS[index % len(VARIANTS)]
        return str(simulator.enqueue_job([f"{RUNNERS}-{variant}"], duration=self.args.job_duration))

    async def _trickle(self, simulator: ActionsSimulator) -> Phase:
        began = time.monotonic()
        jobs = []
        for index in range(self.args.trickle):
            jobs.append(self._enqueue(simulator, index))
            await asyncio.sleep(self.args.trickle_interval)
        return await self._phase(simulator, jobs, began)

    async def _burst(self, simulator: ActionsSimulator) -> Phase:
        began = time.monotonic()
        known = {r.uid for r in self.pods.records.values() if r.kind == "runner"}
        first = time.time()
        jobs = [self._enqueue(simulator, index) for index in range(self.args.burst)]
        phase = await self._phase(simulator, jobs, began)
        created = sorted(
            r.seen_at
            for r in self.pods.records.values()
            if r.kind == "runner" and r.uid not in known
        )
        if len(created) >= self.args.burst:
            phase.all_pods_created_after_first_enqueue = round(
                created[self.args.burst - 1] - first, 2
            )
        return phase

    async def _phase(self, simulator: ActionsSimulator, jobs: list[str], began: float) -> Phase:
        def done() -> bool:
            return all(simulator.engine.job(j).state.value == "completed" for j in jobs)

        await self._until(done, self.args.timeout, f"{len(jobs)} jobs completed")
        by_name = {r.name: r for r in self.pods.records.values() if r.kind == "runner"}
        totals, arcflow, node = [], [], []
        for job_id in jobs:
            job = simulator.engine.job(job_id)
            record = by_name.get(job.runner_name)
            if record is None or record.started_at is None:
                continue
            queued = job.queue_time.timestamp()
            totals.append(record.started_at - queued)
            arcflow.append(record.seen_at - queued)
            node.append(record.started_at - record.seen_at)
        return Phase(
            jobs=len(jobs),
            completed=sum(1 for j in jobs if simulator.engine.job(j).final_result == "succeeded"),
            total_p50=_pct(totals, 0.5), total_p95=_pct(totals, 0.95),
            arcflow_p50=_pct(arcflow, 0.5), arcflow_p95=_pct(arcflow, 0.95),
            node_p50=_pct(node, 0.5), node_p95=_pct(node, 0.95),
            seconds=round(time.monotonic() - began, 2),
        )  # fmt: skip

    async def _stats(self, kube: KubeClient, node: Node) -> dict[str, dict[str, float]]:
        """Per pod of the release's namespace (namespace/name): CPU seconds so far, and RSS and
        working set bytes now, read from the pod's cgroups under the node's root (cgroup v1:
        ``cpuacct.usage``, ``memory.stat``), exact at the moment of reading."""
        listed = await kube.list(POD, namespace=release.NAMESPACE)
        found = {}
        for pod in listed.items:
            meta = pod["metadata"]
            usage = await asyncio.to_thread(_pod_usage, node.cgroup_root, str(meta["uid"]))
            if usage is not None:
                found[f"{meta['namespace']}/{meta['name']}"] = usage
        return found

    async def _sample(self, kube: KubeClient, node: Node, peaks: dict[str, float]) -> None:
        while True:
            with contextlib.suppress(Exception):
                for key, value in (await self._stats(kube, node)).items():
                    peaks[key] = max(peaks.get(key, 0.0), value["working_set"])
            await asyncio.sleep(2.0)

    async def _footprint(
        self,
        kube: KubeClient,
        before: dict[str, dict[str, float]],
        after: dict[str, dict[str, float]],
        peaks: dict[str, float],
    ) -> dict[str, dict[str, Any]]:
        result: dict[str, dict[str, Any]] = {}
        for pod in (await kube.list(POD, namespace=release.NAMESPACE)).items:
            meta = pod["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if key not in after:
                continue
            labels = meta.get("labels") or {}
            cpu = after[key]["cpu"] - before.get(key, {}).get("cpu", 0.0)
            role = "listener" if "listener" in meta["name"] else release.role(pod)
            resources = pod["spec"]["containers"][0].get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            result[role] = {
                "pod": meta["name"],
                "rss_mib_after": round(after[key]["rss"] / 2**20, 1),
                "working_set_mib_after": round(after[key]["working_set"] / 2**20, 1),
                "working_set_mib_peak": round(peaks.get(key, 0.0) / 2**20, 1),
                "cpu_seconds_during_run": round(cpu, 2),
                "cpu_cores_avg_during_run": round(cpu / max(self.run.burst.seconds, 0.001), 3),
                "requests": {"cpu": requests.get("cpu"), "memory": requests.get("memory")},
                "limits": {"cpu": limits.get("cpu"), "memory": limits.get("memory")},
                "memory_request_mib": _mib(requests.get("memory")),
                "memory_limit_mib": _mib(limits.get("memory")),
                "cpu_request_cores": _cores(requests.get("cpu")),
                "labels": {k: v for k, v in labels.items() if k.startswith("app.kubernetes.io/")},
            }
        return result


CGROUPS = Path("/sys/fs/cgroup")


def _pod_usage(root: str, uid: str) -> dict[str, float] | None:
    """None when the pod has no cgroup (yet, or any more: a pod may go while it is read)."""
    cpu = _pod_dir(CGROUPS / "cpuacct", root, uid)
    memory = _pod_dir(CGROUPS / "memory", root, uid)
    if cpu is None or memory is None:
        return None
    try:
        stat = dict(line.split() for line in (memory / "memory.stat").read_text().splitlines())
        usage = float((memory / "memory.usage_in_bytes").read_text())
        seconds = float((cpu / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        return None
    return {
        "cpu": seconds,
        "rss": float(stat.get("total_rss", 0)),
        "working_set": max(0.0, usage - float(stat.get("total_inactive_file", 0))),
    }


def _pod_dir(hierarchy: Path, root: str, uid: str) -> Path | None:
    """The kubelet's cgroup of pod ``uid`` (cgroupfs: ``<root>/kubepods[/<qos>]/pod<uid>``),
    looked up by name: walking the tree races with the runner pods' cgroups going away."""
    base = hierarchy.resolve() / root.strip("/") / "kubepods"
    for qos in ("", "burstable", "besteffort"):
        path = base / qos / f"pod{uid}" if qos else base / f"pod{uid}"
        if path.is_dir():
            return path
    return None


def _mib(value: str | None) -> float | None:
    return None if value is None else round(float(parse_quantity(value)) / 2**20, 1)


def _cores(value: str | None) -> float | None:
    return None if value is None else float(parse_quantity(value))


def _median(values: list[float | None]) -> str:
    found = [v for v in values if v is not None]
    if not found:
        return "-"
    return f"{statistics.median(found):.2f} ({min(found):.2f}-{max(found):.2f})"


PHASE_FIELDS = (
    "total_p50",
    "total_p95",
    "arcflow_p50",
    "arcflow_p95",
    "node_p50",
    "node_p95",
    "all_pods_created_after_first_enqueue",
)


def report(runs: list[Run]) -> None:
    print("\nmedian (min-max) over", len(runs), "runs")
    print("node start s            ", _median([r.node_start_seconds for r in runs]))
    for key in ("services_ready", "scale_sets", "sessions"):
        print(f"helm install -> {key:9}", _median([r.seconds_until.get(key) for r in runs]))
    for name in ("trickle", "burst"):
        phases = [getattr(r, name) for r in runs]
        for field_name in PHASE_FIELDS:
            print(f"{name} {field_name:38}", _median([getattr(p, field_name) for p in phases]))
    roles = sorted({role for r in runs for role in r.pods})
    for role in roles:
        rows = [r.pods[role] for r in runs if role in r.pods]
        print(
            f"{role:11} rss after {_median([x['rss_mib_after'] for x in rows])} MiB, "
            f"peak working set {_median([x['working_set_mib_peak'] for x in rows])} MiB, "
            f"cpu {_median([x['cpu_seconds_during_run'] for x in rows])} s; "
            f"requests {rows[0]['requests']}, limits {rows[0]['limits']}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trickle", type=int, default=20)
    parser.add_argument("--trickle-interval", type=float, default=2.0)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--job-duration", type=float, default=1.0)
    parser.add_argument("--max-runners", type=int, default=100, help="per variant")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--max-load", type=float, default=2.5, help="wait for it at each start")
    parser.add_argument("--out", default="benchmarks/results/node.json")
    args = parser.parse_args()
    images = await asyncio.to_thread(release.build_images)
    started, load_before = time.time(), loadavg()
    runs = []
    for index in range(args.runs):
        # A quiet machine at each start: wait (bounded) for the 1-minute load to fall.
        await asyncio.to_thread(wait_quiet, args.max_load)
        print(f"run {index + 1}/{args.runs}: load {' '.join(loadavg())}", flush=True)
        runs.append(await Bench(images, args, index).measure())
        print(runs[-1], flush=True)
    report(runs)
    write_runs(args.out, "node", label="arcflow on a real node", started=started,
               load_before=load_before, settings=vars(args), runs=runs)  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
