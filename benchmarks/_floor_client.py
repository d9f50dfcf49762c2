"""The floor's client (issue #31, goal 0): the writes of N runner chains, as one plain admin
client makes them; ``_floor.py`` says what one chain writes and why.

Runs in a process of its own by default (``python benchmarks/_floor_client.py OPTIONS_JSON``,
one JSON line out): the benchmark's process also runs the pod runner, and a client sharing it
measured that process's Python time, not the server (docs/benchmarks/floor.md).
``client_chains`` is the same code in-process, for a comparison.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import secrets
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from _stack import EXAMPLE

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
#: The floor's client's rate: high enough never to pace it (the server is what is measured).
CLIENT_QPS = 1000


def client_settings(kubeconfig: str | None, qps: float = CLIENT_QPS) -> KubeSettings:
    """The floor client's Kubernetes settings, in this process or its own."""
    return KubeSettings(kubeconfig=kubeconfig, qps=qps, burst=int(qps))


@dataclass(frozen=True)
class ClientOptions:
    namespace: str
    n: int
    variants: int = 3
    concurrency: int = DEFAULT_CONCURRENCY
    listener_writes: bool = True
    timeout: float = DEFAULT_TIMEOUT


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


def runner_name(generate_name: str, ers_uid: str, index: int) -> str:
    """The reconciler's name scheme (same length and alphabet as the chain's names)."""
    digest = hashlib.sha256(f"{ers_uid}/{index}".encode()).digest()
    return generate_name + "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:5])


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


async def client_chains(kube: KubeClient, options: ClientOptions) -> dict[str, Any]:
    """Every chain at once, in this process; their timings (seconds after ``started``, the
    wall clock of the first write), counts and this process's CPU."""
    namespace, n = options.namespace, options.n
    sets = await prepare_sets(kube, namespace, options.variants)
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
    calls = _Calls(asyncio.Semaphore(max(1, options.concurrency)))
    cpu_before = time.process_time()
    started = time.time()

    async def one(chain: _Chain) -> None:
        try:
            await _run_chain(kube, calls, chain, namespace, listener_writes=options.listener_writes)
        except Exception as exc:  # counted, not fatal: the result says how many failed
            chain.error = f"{type(exc).__name__}: {exc}"[:300]

    tasks = [asyncio.create_task(one(c)) for c in chains.values()]
    done: set[asyncio.Task[None]] = set()
    pending: set[asyncio.Task[None]] = set(tasks)
    try:
        done, pending = await asyncio.wait(tasks, timeout=options.timeout)
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
    total_calls = sum(calls.counts.values())
    return {
        "started": started,
        "names": sorted(chains),
        "variants": len(sets),
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
        "wall_seconds": round(time.time() - started, 2),
        "cpu_seconds_client": round(time.process_time() - cpu_before, 2),
    }


async def client_in_child(kubeconfig: str, options: ClientOptions) -> dict[str, Any]:
    """:func:`client_chains` in a process of its own (this file run as a script)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__)),
        json.dumps({"kubeconfig": kubeconfig, **asdict(options)}),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the floor's client exited {process.returncode}")
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def _main(raw: str) -> None:
    values = json.loads(raw)
    kubeconfig = values.pop("kubeconfig")
    kube = await KubeClient.from_settings(client_settings(kubeconfig))
    try:
        result = await client_chains(kube, ClientOptions(**values))
    finally:
        await kube.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1]))
