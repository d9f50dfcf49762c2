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
client (the pod runner has its own client, as in the chain). ``floor_seconds`` is the time
from the first write until the pod runner had seen every runner pod: the same end point as
``pipeline.py``'s ``all_pods_created_after_first_enqueue``, which starts at the first job's
enqueue.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from _audit import audit_counts
from _stack import EXAMPLE, ROOT, loadavg, proc_usage

from arcflow.common.builders import (
    BuildSettings,
    build_jit_secret,
    build_runner_pod,
    desired_runner_sets,
)
from arcflow.common.builders.runner_set import build_ephemeral_runner, jit_secret_data
from arcflow.common.constants import (
    ANNOTATION_JOB_COMPLETED,
    FINALIZER_ER,
    FINALIZER_ER_REGISTRATION,
)
from arcflow.common.kube import (
    EPHEMERAL_RUNNER,
    POD,
    SECRET,
    ConflictError,
    KubeClient,
    KubeSettings,
)
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.devstack import demo
from arcflow.devstack.factory import StackFactory, StackParts
from arcflow.devstack.pod_runner import PodRunner
from arcflow.devstack.runner_backend import RunnerOutcome

T = TypeVar("T")

#: The reconciler's JIT claim annotation (``arcflow.reconciler.controllers.runner_claims``;
#: not imported: the floor needs no service package).
ANNOTATION_JIT_CLAIM = "arcflow.io/jit-claim"
#: The alphabet of the reconciler's runner names (``runner_name``: ``<ers>-runner-xxxxx``).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: A fake scale set id per variant (the ERS and the JIT config carry one).
SCALE_SET_ID_BASE = 1000
BUILD = BuildSettings(controller_namespace="arc-systems", listener_image="arcflow/listener:dev")
DEFAULT_CONCURRENCY = 32
DEFAULT_TIMEOUT = 300.0


def commit() -> dict[str, Any]:
    """The checkout's full commit and whether its working tree had changes (others may work
    in it: a dirty tree is not exactly that commit)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=ROOT, check=False
        ).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def fake_jit_config(runner_id: int, name: str, scale_set_id: int) -> str:
    """Shaped and sized like the Actions simulator's JIT config (base64 JSON of base64 JSON
    runner files), so the Secret weighs what the chain's does; nothing ever reads it."""

    def b64(data: dict[str, Any]) -> str:
        return base64.b64encode(json.dumps(data).encode()).decode()

    server = "http://127.0.0.1:40000/example-org/"
    return b64(
        {
            ".runner": b64(
                {
                    "agentId": runner_id,
                    "agentName": name,
                    "poolId": 0,
                    "scaleSetId": scale_set_id,
                    "serverUrl": server,
                    "workFolder": "_work",
                    "ephemeral": True,
                }
            ),
            ".credentials": b64(
                {
                    "scheme": "OAuth",
                    "data": {
                        "clientId": str(runner_id),
                        "clientSecret": secrets.token_urlsafe(24),
                        "authorizationUrl": f"{server}_apis/oauth2/token",
                    },
                }
            ),
        }
    )


CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager")


def control_plane_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's control plane children, by name (the floor's
    client and the pod runner are this process: its own CPU is measured apart)."""
    out: dict[str, float] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                name = os.path.basename(handle.read().split(b"\0")[0].decode())
        except (OSError, ValueError, IndexError):
            continue
        if name in CONTROL_PLANE:
            out[name] = out.get(name, 0.0) + proc_usage(int(entry))[1]
    return out


def runner_name(generate_name: str, ers_uid: str, index: int) -> str:
    """The reconciler's name scheme (same length and alphabet as the chain's names)."""
    digest = hashlib.sha256(f"{ers_uid}/{index}".encode()).digest()
    return generate_name + "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:5])


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


@dataclass
class _Chain:
    index: int
    name: str
    ers: dict[str, Any]
    runner_id: int
    running: asyncio.Event = field(default_factory=asyncio.Event)
    terminated: asyncio.Event = field(default_factory=asyncio.Event)
    pod_gone: asyncio.Event = field(default_factory=asyncio.Event)
    created_at: dict[str, float] = field(default_factory=dict)
    running_at: float | None = None
    pod_deleted_at: float | None = None
    er_gone_at: float | None = None
    secret_gone_at: float | None = None
    error: str | None = None


@dataclass
class _Calls:
    """The floor client's requests: bounded in flight, counted by verb and resource."""

    slots: asyncio.Semaphore
    counts: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0

    async def __call__(self, key: str, make: Callable[[], Awaitable[T]]) -> T:
        async with self.slots:
            self.counts[key] += 1
            return await make()


def _pod_state(pod: dict[str, Any]) -> tuple[bool, bool]:
    """(running, terminated) of the runner container as a status reports it."""
    status = pod.get("status") or {}
    running = terminated = False
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        running = running or "running" in state
        terminated = terminated or "terminated" in state
    return running and status.get("phase") == "Running", terminated


async def _watch_pods(
    kube: KubeClient, namespace: str, chains: dict[str, _Chain], version: str
) -> None:
    """The floor's own pod watch (the reconciler's cache has one too): Running, terminated,
    gone, per chain."""
    while True:
        try:
            async with kube.watch(POD, namespace=namespace, resource_version=version) as stream:
                async for event in stream:
                    version = event.resource_version or version
                    meta = event.object.get("metadata") or {}
                    chain = chains.get(str(meta.get("name")))
                    if chain is None:
                        continue
                    now = time.time()
                    if event.type == "DELETED":
                        chain.pod_deleted_at = chain.pod_deleted_at or now
                        chain.pod_gone.set()
                        chain.terminated.set()
                        continue
                    running, terminated = _pod_state(event.object)
                    if running and chain.running_at is None:
                        chain.running_at = now
                        chain.running.set()
                    if terminated:
                        chain.running.set()
                        chain.terminated.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            await asyncio.sleep(0.2)


async def _run_chain(
    kube: KubeClient,
    calls: _Calls,
    chain: _Chain,
    namespace: str,
    *,
    listener_writes: bool,
) -> None:
    name = chain.name
    er_doc = build_ephemeral_runner(chain.ers, BUILD)
    er_doc["metadata"].pop("generateName", None)
    er_doc["metadata"]["name"] = name
    er_doc["metadata"]["finalizers"] = [FINALIZER_ER, FINALIZER_ER_REGISTRATION]
    er_doc["metadata"]["annotations"][ANNOTATION_JIT_CLAIM] = f"floor@{time.time()}"
    er = await calls("create ephemeralrunners", lambda: kube.create(er_doc))
    chain.created_at["er"] = time.time()
    scale_set_id = int((er.get("spec") or {}).get("runnerScaleSetId") or 0)
    jit = fake_jit_config(chain.runner_id, name, scale_set_id)
    secret_doc = build_jit_secret(
        er, BUILD, encoded_jit_config=jit, runner_id=chain.runner_id, runner_name=name
    )
    await calls("create secrets", lambda: kube.create(secret_doc))
    chain.created_at["secret"] = time.time()
    data = jit_secret_data(er, encoded_jit_config=jit, runner_id=chain.runner_id, runner_name=name)
    pod_doc = build_runner_pod(er, data, BUILD)
    await calls("create pods", lambda: kube.create(pod_doc))
    chain.created_at["pod"] = time.time()

    await chain.running.wait()
    registration = {"phase": "Running", "ready": True, "runnerId": chain.runner_id}
    registration["runnerName"] = name
    er = await calls(
        "patch ephemeralrunners/status",
        lambda: kube.patch_status(EPHEMERAL_RUNNER, name, registration, namespace=namespace),
    )
    if listener_writes:
        job = {
            "jobRequestId": chain.runner_id,
            "jobRepositoryName": "example-org/example-repo",
            "jobId": f"floor-job-{chain.index}",
            "workflowRunId": 100000 + chain.index,
            "jobWorkflowRef": "example-org/example-repo/.github/workflows/ci.yml@refs/heads/main",
            "jobDisplayName": "build",
        }
        er = await calls(
            "patch ephemeralrunners/status",
            lambda: kube.patch_status(EPHEMERAL_RUNNER, name, job, namespace=namespace),
        )

    await chain.terminated.wait()
    if listener_writes:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        completed = {"metadata": {"annotations": {ANNOTATION_JOB_COMPLETED: stamp}}}
        er = await calls(
            "patch ephemeralrunners",
            lambda: kube.patch_merge(EPHEMERAL_RUNNER, name, completed, namespace=namespace),
        )
    deleting = await calls(
        "delete ephemeralrunners",
        lambda: kube.delete(EPHEMERAL_RUNNER, name, namespace=namespace),
    )
    er = deleting or er
    # The pod and its Secret go before the finalizers, as the reconciler's clean-up orders
    # them: once the runner is gone the garbage collector would race these deletes.
    await asyncio.gather(
        calls("delete pods", lambda: kube.delete(POD, name, namespace=namespace)),
        calls("delete secrets", lambda: kube.delete(SECRET, name, namespace=namespace)),
    )
    chain.secret_gone_at = time.time()
    version = str((er.get("metadata") or {}).get("resourceVersion") or "")
    for _attempt in range(5):
        release = {"metadata": {"finalizers": [], "resourceVersion": version}}
        try:
            await calls(
                "patch ephemeralrunners",
                lambda body=release: kube.patch_merge(  # type: ignore[misc]
                    EPHEMERAL_RUNNER, name, body, namespace=namespace
                ),
            )
            break
        except ConflictError:
            calls.conflicts += 1
            fresh = await calls(
                "get ephemeralrunners", lambda: kube.get(EPHEMERAL_RUNNER, name, namespace)
            )
            version = str(fresh["metadata"].get("resourceVersion") or "")
    chain.er_gone_at = time.time()


async def prepare_sets(kube: KubeClient, namespace: str, variants: int = 3) -> list[dict[str, Any]]:
    """The example ARS (examples/02-runner-variants.yaml) and the EphemeralRunnerSets of its
    first ``variants`` variants, as the reconciler builds them, created as they are (nothing
    reconciles them: no arcflow service runs). Not timed."""
    raw = demo.load_example_ars(EXAMPLE)
    raw["metadata"]["namespace"] = namespace
    ars = demo.prepare_ars(raw, github_config_url="https://github.com/example-org")
    created = await kube.create(ars)
    model = AutoscalingRunnerSet.model_validate(created)
    names = [v.name for v in model.spec.effective_variants()]
    ids = {v: SCALE_SET_ID_BASE + i for i, v in enumerate(names)}
    sets = []
    for doc in desired_runner_sets(model, ids, BUILD)[: max(1, variants)]:
        sets.append(await kube.create(doc))
    return sets


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
) -> dict[str, Any]:
    """N runner chains over ``variants`` variants, round-robin; see the module's doc. The
    pod runner must play pods with :class:`HoldBackend` (or any backend that ends them)."""
    sets = await prepare_sets(kube, namespace, variants)
    chains: dict[str, _Chain] = {}
    for index in range(n):
        ers = sets[index % len(sets)]
        meta = ers["metadata"]
        generate_name = f"{meta['name']}-runner-"
        name = runner_name(generate_name, str(meta["uid"]), index // len(sets))
        chains[name] = _Chain(index=index, name=name, ers=ers, runner_id=index + 1)
    version = (await kube.list(POD, namespace=namespace)).resource_version
    watcher = asyncio.create_task(_watch_pods(kube, namespace, chains, version))
    await asyncio.sleep(0.2)  # the watch is open before the first write
    before = set(pod_runner.records)
    calls = _Calls(asyncio.Semaphore(max(1, concurrency)))
    load_at_start = loadavg()
    cpu_before = time.process_time()
    plane_before = control_plane_cpu()
    started = time.time()
    audit_since = started - 0.05

    async def one(chain: _Chain) -> None:
        try:
            await _run_chain(kube, calls, chain, namespace, listener_writes=listener_writes)
        except Exception as exc:  # counted, not fatal: the result says how many failed
            chain.error = f"{type(exc).__name__}: {exc}"[:300]

    tasks = [asyncio.create_task(one(c)) for c in chains.values()]
    done: set[asyncio.Task[None]] = set()
    pending: set[asyncio.Task[None]] = set(tasks)
    try:
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        # A pod's end is its DELETED event (a graceful delete waits for the pod runner).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*(c.pod_gone.wait() for c in chains.values())), 30.0
            )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    cpu_seconds = time.process_time() - cpu_before
    plane_cpu = {k: round(v - plane_before.get(k, 0.0), 2) for k, v in control_plane_cpu().items()}
    wall = time.time() - started
    names = set(chains)
    seen = [
        r
        for uid, r in pod_runner.records.items()
        if uid not in before and r.kind == "runner" and r.name in names
    ]

    def last(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(max(known) - started, 3) if len(known) == len(values) and known else None

    errors = [c.error for c in chains.values() if c.error]
    gone = [
        None
        if None in (c.pod_deleted_at, c.er_gone_at, c.secret_gone_at)
        else max(c.pod_deleted_at or 0, c.er_gone_at or 0, c.secret_gone_at or 0)
        for c in chains.values()
    ]
    await asyncio.sleep(1.0)  # the last requests reach the audit log
    audit = audit_counts(audit_log, since=audit_since) if audit_log is not None else None
    total_calls = sum(calls.counts.values())
    return {
        "jobs": n,
        "variants": len(sets),
        "concurrency": concurrency,
        "listener_writes": listener_writes,
        "job_seconds": getattr(pod_runner.runner_backend, "job_seconds", None),
        "loadavg_at_start": load_at_start,
        "floor_seconds": round(max(r.seen_at for r in seen) - started, 3)
        if len(seen) == n
        else None,
        "pods_seen": len(seen),
        "runners_created_seconds": last([c.created_at.get("er") for c in chains.values()]),
        "pods_created_seconds": last([c.created_at.get("pod") for c in chains.values()]),
        "pods_running_seconds": last([c.running_at for c in chains.values()]),
        "all_deleted_seconds": last(gone),
        "chains_done": len(done),
        "chains_unfinished": len(pending),
        "errors": len(errors),
        "first_errors": errors[:5],
        "finalizer_conflicts": calls.conflicts,
        "api_calls_floor": dict(sorted(calls.counts.items())),
        "api_calls_floor_per_runner": round(total_calls / max(1, n), 2),
        "api_calls_audit": audit,
        # Who was busy: if this process's CPU comes near the wall time, the floor measured
        # its own client (and the pod runner), not the server.
        "wall_seconds": round(wall, 2),
        "cpu_seconds_benchmark_process": round(cpu_seconds, 2),
        "cpu_seconds_control_plane": plane_cpu,
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
    qps: float = 1000,
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
        kube = await KubeClient.from_settings(
            KubeSettings(kubeconfig=parts.kubeconfig, qps=qps, burst=int(qps))
        )
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
) -> dict[str, Any]:
    """One floor run on a fresh stack (brought up and torn down here)."""
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
        )
    result["kube"] = kube_backend
    return result


def ratio(value: float | None, floor: float | None) -> float | None:
    """``value / floor`` rounded, or ``None`` when either is missing."""
    if value is None or not floor:
        return None
    return round(value / floor, 2)


__all__ = [
    "FloorStack",
    "HoldBackend",
    "commit",
    "floor_run",
    "floor_stack",
    "measure_floor",
    "prepare_sets",
    "ratio",
]
