"""Shared harness of the pipeline benchmarks (P1, P2, P6): the stack of
:class:`arcflow.devstack.factory.StackFactory` with a counting proxy per Kubernetes client.

Not a test and not part of the product. Layout:

* nats-server (a process), Kubernetes (``kube="emulator"``: the API emulator in this process,
  the results' historical baseline; ``kube="apiserver"``: a real etcd, kube-apiserver and
  kube-controller-manager, with an audit log), the Actions simulator and the pod runner in this
  process (as ``arcflow dev`` runs them);
* the factory's :class:`~arcflow.devstack.factory.ApiProxy` in front of the server, one port
  **per client** (watcher, registrar, reconciler, listener pods, kubelet stand-in), so every API
  request is counted by client, verb and resource; on the real server the audit log counts
  them again per user (:mod:`_audit`);
* watcher, registrar and reconciler as ``python -m arcflow.<service>`` with default settings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _audit import audit_counts

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import EPHEMERAL_RUNNER, POD, ConflictError, KubeClient, KubeSettings
from arcflow.devstack import demo
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.factory import ApiProxy, StackFactory, StackParts
from arcflow.devstack.nats_server import NatsServer
from arcflow.devstack.pod_runner import PodRunner, classify_pod

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "02-runner-variants.yaml"
SERVICES = ("watcher", "registrar", "reconciler")
CLIENTS = (*SERVICES, "listener", "kubelet")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CONTROLLER_NAMESPACE = "arc-systems"


def proc_usage(pid: int) -> tuple[float, float]:
    """(resident MiB, CPU seconds) of one process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        rss = 0
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return rss / 1024, cpu
    except OSError:
        return 0.0, 0.0


def profiled_services(folder: Path) -> dict[str, tuple[str, ...]]:
    """``ARCFLOW_BENCH_PROFILE=<service>[,<service>...]``: the ``python`` arguments that run
    those services under cProfile; each profile is written to ``<folder>/<service>.prof``
    when the service stops (SIGTERM ends it cleanly)."""
    names = os.environ.get("ARCFLOW_BENCH_PROFILE", "").split(",")
    return {name: ("-m", "cProfile", "-o", str(folder / f"{name}.prof")) for name in names if name}


def loadavg() -> list[float]:
    with open("/proc/loadavg") as handle:
        return [float(x) for x in handle.read().split()[:3]]


def nats_in_msgs(stack: Stack) -> int:
    """Messages the stack's nats-server has received so far (its monitoring endpoint)."""
    assert stack.nats is not None
    with urllib.request.urlopen(f"{stack.nats.monitor_url}/varz", timeout=5) as r:  # noqa: S310
        return int(json.load(r)["in_msgs"])


def nats_counters(monitor_url: str) -> dict[str, Any]:
    """A nats-server's message counters (``/varz``: received, sent) and each stream's last
    sequence (``/jsz``): their differences over a phase are the messages it carried and those
    each stream stored."""
    with urllib.request.urlopen(f"{monitor_url}/varz", timeout=5) as r:  # noqa: S310
        varz = json.load(r)
    with urllib.request.urlopen(f"{monitor_url}/jsz?streams=true", timeout=5) as r:  # noqa: S310
        jsz = json.load(r)
    streams: dict[str, int] = {}
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            streams[stream["name"]] = int(stream["state"]["last_seq"])
    return {"in_msgs": int(varz["in_msgs"]), "out_msgs": int(varz["out_msgs"]), "streams": streams}


def machine() -> dict[str, Any]:
    with open("/proc/loadavg") as handle:
        load = handle.read().split()[:3]
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": [float(x) for x in load],
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }


@dataclass
class Stack:
    """``async with Stack(max_runners=...) as stack``: everything up, the example ARS applied."""

    max_runners: int = 1000
    env: dict[str, str] = field(default_factory=dict)
    #: False: no example ARS, and a kubelet stand-in that only marks pods Running (no
    #: listener processes): the scale benchmark applies its own ARSs.
    example: bool = True
    #: With ``example=False``: run the real pod runner (listener processes) instead of the
    #: stand-in, still without the example ARS (the scale benchmark's ``--real-listeners``).
    real_listeners: bool = False
    #: Seconds the simulator holds an empty message poll (GitHub holds it about 50 s).
    poll_timeout: float = 5.0
    #: A bytecode cache for listener processes (``PYTHONPYCACHEPREFIX``), filled before the
    #: services start: the container image compiles bytecode at build, so a listener pod
    #: does not compile its modules at every start. ``None``: compile at every start.
    listener_bytecode_cache: str | None = None
    #: False: every client talks to the server directly, with no counting proxy in this
    #: process (no request counts): the proxies double the HTTP work of this one process,
    #: which also serves the emulator, the simulator and the pod runner.
    count_requests: bool = True
    #: ``emulator`` or ``apiserver`` (a real control plane with an audit log).
    kube_backend: str = "emulator"
    #: ``apiserver`` only: each service as its chart's ServiceAccount (the factory's
    #: ``identities=True``), so the audit log counts the requests per service.
    identities: bool = False
    temp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="arcflow-bench-")))
    parts: StackParts | None = None
    nats: NatsServer | None = None
    simulator: ActionsSimulator | None = None
    #: The harness's own observer, as the admin (never through the proxy: not counted).
    kube: KubeClient | None = None
    pod_runner: PodRunner | None = None
    proxy: ApiProxy | None = None
    ars: dict[str, Any] = field(default_factory=dict)
    targets: list[Any] = field(default_factory=list)
    kubelet_task: asyncio.Task[None] | None = None
    #: When the counts were last reset (the audit log's window starts there).
    counted_since: float = 0.0
    _exit: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def __aenter__(self) -> Stack:
        try:
            await self.start()
        except BaseException:
            await self._exit.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exit.aclose()

    async def start(self) -> None:
        stand_in = not self.example and not self.real_listeners
        listener_env: dict[str, str] = {}
        if self.listener_bytecode_cache and not stand_in:
            listener_env.update(
                PYTHONPYCACHEPREFIX=self.listener_bytecode_cache, PYTHONDONTWRITEBYTECODE=""
            )
            await warm_bytecode_cache(listener_env)
        if "PYTHONPATH" in self.env:  # another source tree (--before-rev): the listener's too
            listener_env["PYTHONPATH"] = self.env["PYTHONPATH"]
        raw = demo.load_example_ars(EXAMPLE)
        factory = StackFactory(
            kube=self.kube_backend,
            audit=self.kube_backend == "apiserver",
            identities=self.identities and self.kube_backend == "apiserver",
            poll_timeout=self.poll_timeout,
            pod_runner=not stand_in,
            job_duration=1.0,
            service_env=self.env,
            service_python_args=profiled_services(self.temp),
            listener_env=listener_env,
            namespaces=[str(raw["metadata"]["namespace"])] if self.example else [],
            proxy=self.count_requests,
            work_dir=self.temp,
        )
        parts = self.parts = await self._exit.enter_async_context(factory)
        self.nats, self.simulator = parts.nats, parts.simulator
        self.kube, self.pod_runner, self.proxy = parts.kube, parts.pod_runner, parts.proxy
        if stand_in:
            kubelet = await KubeClient.from_settings(
                KubeSettings(kubeconfig=parts.kubeconfig_for("kubelet"), qps=1000, burst=1000)
            )
            self._exit.push_async_callback(kubelet.close)
            self.kubelet_task = asyncio.create_task(mark_pods_running(kubelet))
            self._exit.push_async_callback(_cancel, self.kubelet_task)
        if self.example:
            await self._apply(raw)

    def kubeconfig_for(self, client: str) -> str:
        assert self.parts is not None
        return self.parts.kubeconfig_for(client)

    async def _apply(self, raw: dict[str, Any]) -> None:
        assert self.kube is not None
        assert self.simulator is not None
        spec = raw["spec"]
        spec["maxRunners"] = self.max_runners
        spec["minRunners"] = 0
        for variant in spec.get("runnerVariants") or []:
            variant["maxRunners"] = self.max_runners
            variant["minRunners"] = 0
        self.ars = demo.prepare_ars(raw, github_config_url=self.simulator.config_url("example-org"))
        self.targets = demo.variant_targets(self.ars)
        namespace = self.ars["metadata"]["namespace"]
        token = self.simulator.add_pat()
        with contextlib.suppress(ConflictError):  # the factory made it on a real server
            await self.kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        for document in (
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": spec["githubConfigSecret"], "namespace": namespace},
                "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
            },
            self.ars,
        ):
            await self.kube.create(document)

    async def wait_ready(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        """Until every variant's scale set has an open message session (the listener runs)."""
        assert self.simulator is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snapshot = self.simulator.snapshot()
            sets = {s["name"]: s for s in snapshot["scaleSets"]}
            names = {t.scale_set_name for t in self.targets}
            if names <= set(sets) and all(sets[n].get("session") for n in names):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("the stack did not become ready (scale sets and sessions)")

    async def wait_drained(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        """Until no EphemeralRunner and no runner pod is left (every lifecycle finished)."""
        assert self.kube is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runners = (await self.kube.list(EPHEMERAL_RUNNER)).items
            pods = [p for p in (await self.kube.list(POD)).items if classify_pod(p) == "runner"]
            if not runners and not pods:
                return
            await asyncio.sleep(0.25)
        raise TimeoutError("runners were not cleaned up")

    def reset_counts(self) -> None:
        self.counted_since = time.time()
        if self.proxy is not None:
            self.proxy.reset()

    def counts(self) -> dict[str, dict[str, int]]:
        return self.proxy.totals() if self.proxy is not None else {}

    @property
    def control_plane(self) -> ControlPlane | None:
        """The real control plane (``None`` on the emulator, or before the stack started)."""
        return self.parts.control_plane if self.parts is not None else None

    def audit_counts(self) -> dict[str, Any] | None:
        """Requests per user (and per verb/resource) in the audit log since the last
        :meth:`reset_counts` (``None`` on the emulator, which has no audit log)."""
        return self.audit_counts_since(self.counted_since)

    def arcflow_users(self, audit: dict[str, Any] | None) -> dict[str, int]:
        """Of an :meth:`audit_counts` answer: requests per arcflow identity (the services'
        ServiceAccounts and the listeners', all in the controller namespace; with
        ``identities=False`` the services are the ``admin``, shared with the pod runner)."""
        if not audit:
            return {}
        prefix = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:"
        return {u: n for u, n in audit["by_user"].items() if u.startswith(prefix)}

    def identity_objects(self) -> set[tuple[str, str, str]]:
        """(kind, namespace, name) of every object the identities applied (not the ARS's)."""
        if self.parts is None:
            return set()
        return {
            (str(o["kind"]), str(o["metadata"].get("namespace", "")), str(o["metadata"]["name"]))
            for identity in self.parts.identities.values()
            for o in identity.objects
        }

    def audit_counts_since(self, since: float) -> dict[str, Any] | None:
        plane = self.control_plane
        return None if plane is None else audit_counts(plane.audit_log, since=since)

    def usage(self) -> dict[str, dict[str, float]]:
        out = {}
        for name, service in (self.parts.services if self.parts else {}).items():
            process = service.process.process
            if process is None:
                continue
            rss, cpu = proc_usage(process.pid)
            out[name] = {"rss_mib": round(rss, 1), "cpu_seconds": round(cpu, 2)}
        return out


async def warm_bytecode_cache(env: dict[str, str]) -> None:
    """Compile the listener's modules into the cache once (what an image build does)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "try:\n    import arcflow.common.lean as l\n"
        "except ImportError:\n    import arcflow.listener.lean as l\n"
        "l.skip_optional_imports()\n"
        "import arcflow.listener.app\n"
        "try:\n    import arcflow.listener.service, arcflow.common.service.entry\n"
        "except ImportError:\n    import arcflow.listener.main",
        env={**os.environ, **env},
    )
    await process.wait()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def mark_pods_running(kube: KubeClient) -> None:
    """A kubelet stand-in: every new Pod gets ``phase: Running`` with running containers."""
    seen: set[str] = set()
    version = (await kube.list(POD)).resource_version
    while True:
        try:
            async with kube.watch(POD, resource_version=version) as stream:
                async for event in stream:
                    version = event.resource_version or version
                    meta = event.object.get("metadata") or {}
                    uid = str(meta.get("uid"))
                    if event.type != "ADDED" or uid in seen:
                        continue
                    seen.add(uid)
                    containers = (event.object.get("spec") or {}).get("containers") or []
                    status = {
                        "phase": "Running",
                        "containerStatuses": [
                            {"name": c.get("name"), "state": {"running": {}}} for c in containers
                        ],
                    }
                    with contextlib.suppress(Exception):
                        await kube.patch_status(
                            POD, str(meta["name"]), status, namespace=str(meta["namespace"])
                        )
        except asyncio.CancelledError:
            raise
        except Exception:
            await asyncio.sleep(0.5)


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "min": round(ordered[0], 3),
        "median": round(ordered[len(ordered) // 2], 3),
        "max": round(ordered[-1], 3),
    }


def write_result(name: str, payload: dict[str, Any]) -> Path:
    out = ROOT / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return out
