"""The floor of the runner pipeline (issue #31, goal 0): the Kubernetes writes of N runner
lifecycles, made by one plain admin client as fast as the control plane and the pod runner
take them, with no arcflow service, no NATS traffic and no GitHub in between.

Not a test and not part of the product. What one runner's chain writes here is what the
chain of ``pipeline.py`` writes for it (its audit log, per runner), in the same order:

* the reconciler's ``POST`` EphemeralRunner (built by ``build_ephemeral_runner`` from the
  variant's EphemeralRunnerSet, named, with both finalizers and the JIT claim at creation, as
  ``_create_named`` does: there is no separate finalizer patch any more), ``POST`` JIT Secret
  (``build_jit_secret``, a fake JIT config shaped and sized like the simulator's), ``POST``
  Pod (``build_runner_pod``);
* the pod runner (:class:`arcflow.devstack.pod_runner.PodRunner`, the admin, as in the
  chain): binding, status Pending, ``GET`` of the Secret, status Running, then, after
  ``job_seconds`` (the chain's job, 1 s), status terminated with exit code 0. Its runner
  backend is :class:`HoldBackend`: the pod's "runner" never contacts anything (the JIT config
  is fake), it only holds the pod Running for the job's time;
* once the pod is seen Running: the reconciler's status patch (runner id and name, phase
  Running, ready) and the listener's job-started status patch (``listener_writes``);
* once the pod is seen terminated: the listener's job-completed annotation patch, the
  reconciler's ``DELETE`` of the EphemeralRunner, then the deletes of the Pod and the Secret
  (in the chain the garbage collector makes these two, later and rate-limited) and the patch
  that removes the finalizers (the EphemeralRunner is gone then).

Every chain runs at once; ``concurrency`` bounds the requests in flight of the floor's own
client (the pod runner has its own client, as in the chain). That client runs in a process of
its own (``_floor_client.py``), as the reconciler and the listener do, unless asked to share
this one (``floor.py --no-client-process``). ``floor_seconds`` is the time
from the first write until the pod runner had seen every runner pod: the same end point as
``pipeline.py``'s ``all_pods_created_after_first_enqueue``, which starts at the first job's
enqueue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _audit import audit_counts
from _cpu_timeline import CpuTimeline, sample
from _floor_client import (
    CLIENT_QPS,
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT,
    ClientOptions,
    client_chains,
    client_in_child,
    client_settings,
)
from _pprof import ServerProfile
from _stack import ROOT, loadavg

from arcflow.common.kube import KubeClient
from arcflow.devstack.factory import StackFactory, StackParts
from arcflow.devstack.pod_runner import PodRunner
from arcflow.devstack.runner_backend import RunnerOutcome


def commit() -> dict[str, Any]:
    """The checkout's full commit and whether its working tree had changes (others may work
    in it: a dirty tree is not exactly that commit)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=ROOT, check=False
        ).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")


def control_plane_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's control plane children, by name (the floor's
    client and the pod runner are this process: its own CPU is measured apart)."""
    out: dict[str, float] = {}
    for name, cpu in sample(os.getpid()).values():
        if name in CONTROL_PLANE:
            out[name] = out.get(name, 0.0) + cpu
    return out


def control_plane_cpu_since(before: dict[str, float]) -> dict[str, float]:
    """The control plane's CPU seconds by name since ``before`` (a :func:`control_plane_cpu`)."""
    return {k: round(v - before.get(k, 0.0), 2) for k, v in control_plane_cpu().items()}


class HoldBackend:
    """The pod runner's runner backend for the floor: no runner and no job (the JIT config is
    fake), the pod held Running for ``job_seconds`` (the chain's job), then exit 0. The pod
    runner's own writes (binding, the Secret's read, the three statuses) stay as they are."""

    def __init__(self, job_seconds: float = 1.0) -> None:
        self.job_seconds = job_seconds

    async def run(
        self, jit_config: str, on_job: Callable[[str], None] | None = None
    ) -> RunnerOutcome:
        await asyncio.sleep(self.job_seconds)
        return RunnerOutcome(0, None)


async def floor_run(
    kube: KubeClient,
    pod_runner: PodRunner,
    namespace: str,
    n: int,
    variants: int = 3,
    concurrency: int = DEFAULT_CONCURRENCY,
    *,
    listener_writes: bool = True,
    audit_log: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    kubeconfig: str | None = None,
    plane: Any = None,
) -> dict[str, Any]:
    """N runner chains over ``variants`` variants, round-robin; see the module's doc. The
    pod runner must play pods with :class:`HoldBackend` (or any backend that ends them). With
    ``kubeconfig`` the chains' client runs in a process of its own (``_floor_client.py``),
    else in this one, beside the pod runner. ``plane`` (the control plane) lets
    ``ARCFLOW_BENCH_APISERVER_PPROF`` profile its server over the run (``_pprof.py``)."""
    options = ClientOptions(namespace, n, variants, concurrency, listener_writes, timeout)
    before = set(pod_runner.records)
    load_at_start = loadavg()
    cpu_before = time.process_time()
    plane_before = control_plane_cpu()
    server_profile = ServerProfile(plane, f"floor-{n}")
    server_profile.start()
    timeline = CpuTimeline()
    timeline.start()
    if kubeconfig is None:
        client = await client_chains(kube, options)
    else:
        client = await client_in_child(kubeconfig, options)
    started = float(client.pop("started"))
    names = set(client.pop("names"))
    cpu_seconds = time.process_time() - cpu_before
    plane_cpu = control_plane_cpu_since(plane_before)
    seen = [
        r
        for uid, r in pod_runner.records.items()
        if uid not in before and r.kind == "runner" and r.name in names
    ]
    await asyncio.sleep(1.0)  # the last requests reach the audit log
    await timeline.stop()
    all_pods_at = max((r.seen_at for r in seen), default=started)
    apiserver_profile = await server_profile.wait()
    audit = audit_counts(audit_log, since=started - 0.05) if audit_log is not None else None
    cpu_client = client.pop("cpu_seconds_client")
    return {
        "jobs": n,
        "concurrency": concurrency,
        "listener_writes": listener_writes,
        "job_seconds": getattr(pod_runner.runner_backend, "job_seconds", None),
        "loadavg_at_start": load_at_start,
        "floor_seconds": round(max(r.seen_at for r in seen) - started, 3)
        if len(seen) == n
        else None,
        "pods_seen": len(seen),
        **client,
        "api_calls_audit": audit,
        "client_process": kubeconfig is not None,
        # Who was busy: if a process's CPU comes near the wall time, the floor measured that
        # process (the pod runner, or the client in it), not the server.
        "cpu_seconds_benchmark_process": round(cpu_seconds, 2),
        "cpu_seconds_floor_client": cpu_client if kubeconfig is not None else None,
        "cpu_seconds_control_plane": plane_cpu,
        "apiserver_profile": apiserver_profile,
        # Who used the cores until every runner pod existed, and over the whole run.
        "cpu_to_all_pods": timeline.between(started, all_pods_at),
        "cpu_whole_run": timeline.between(started, time.time()),
    }


@dataclass
class FloorStack:
    """A control plane with the CRDs, the pod runner and the floor's own admin client."""

    parts: StackParts
    kube: KubeClient
    namespace: str

    @property
    def pod_runner(self) -> PodRunner:
        assert self.parts.pod_runner is not None
        return self.parts.pod_runner

    @property
    def audit_log(self) -> Path | None:
        plane = self.parts.control_plane
        return None if plane is None else plane.audit_log


@contextlib.asynccontextmanager
async def floor_stack(
    kube_backend: str = "apiserver",
    *,
    namespace: str = "arc-runners",
    job_seconds: float = 1.0,
    qps: float = CLIENT_QPS,
) -> AsyncIterator[FloorStack]:
    """A fresh control plane (or the emulator) with the CRDs and the pod runner only: the
    factory with no services and no Actions simulator (its nats-server starts, nothing uses
    it). The pod runner binds and plays pods as in the chain, with :class:`HoldBackend`."""
    temp = Path(tempfile.mkdtemp(prefix="arcflow-floor-"))
    factory = StackFactory(
        kube=kube_backend,
        audit=kube_backend == "apiserver",
        services=(),
        simulator=False,
        pod_runner=True,
        controller_namespace=None,
        namespaces=[namespace],
        work_dir=temp,
    )
    async with factory as parts:
        assert parts.pod_runner is not None
        parts.pod_runner.runner_backend = HoldBackend(job_seconds)
        kube = await KubeClient.from_settings(client_settings(parts.kubeconfig, qps))
        try:
            yield FloorStack(parts, kube, namespace)
        finally:
            await kube.close()


async def measure_floor(
    jobs: int,
    *,
    kube_backend: str = "apiserver",
    variants: int = 3,
    concurrency: int = DEFAULT_CONCURRENCY,
    job_seconds: float = 1.0,
    listener_writes: bool = True,
    client_process: bool = True,
) -> dict[str, Any]:
    """One floor run on a fresh stack (brought up and torn down here); the client in a
    process of its own unless ``client_process`` is false."""
    async with floor_stack(kube_backend, job_seconds=job_seconds) as stack:
        result = await floor_run(
            stack.kube,
            stack.pod_runner,
            stack.namespace,
            jobs,
            variants,
            concurrency,
            listener_writes=listener_writes,
            audit_log=stack.audit_log,
            kubeconfig=stack.parts.kubeconfig if client_process else None,
            plane=stack.parts.control_plane,
        )
    result["kube"] = kube_backend
    return result


def ratio(value: float | None, floor: float | None) -> float | None:
    """``value / floor`` rounded, or ``None`` when either is missing."""
    if value is None or not floor:
        return None
    return round(value / floor, 2)


__all__ = [
    "DEFAULT_CONCURRENCY",
    "FloorStack",
    "HoldBackend",
    "commit",
    "floor_run",
    "floor_stack",
    "measure_floor",
    "ratio",
]
