"""Shared harness of the pipeline benchmarks (P1, P2, P6): the services as processes, a
counting proxy per Kubernetes client, the Actions simulator and the pod runner (kubelet).

Not a test and not part of the product. Layout:

* nats-server (a process), the Kubernetes API emulator, the Actions simulator and the pod
  runner in this process (as ``arcflow dev`` runs them);
* one counting HTTP proxy in front of the emulator **per client** (watcher, registrar,
  reconciler, listener pods, kubelet stand-in), each client given a kubeconfig pointing at its
  own proxy, so every API request is counted by client, verb and resource;
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import EPHEMERAL_RUNNER, POD, KubeClient, KubeSettings
from arcflow.devstack import demo
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer, free_port
from arcflow.devstack.pod_runner import (
    PodRunner,
    SimulatedRunnerBackend,
    classify_pod,
    set_parent_death_signal,
)
from arcflow.devstack.stack import service_env

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "02-runner-variants.yaml"
SERVICES = ("watcher", "registrar", "reconciler")
CLIENTS = (*SERVICES, "listener", "kubelet")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def classify(method: str, path: str, query: str) -> tuple[str, str]:
    """(verb, resource) of one API request, as kubectl's audit log would name them."""
    parts = [p for p in path.split("/") if p]
    # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if rest else "?"
    sub = rest[2] if len(rest) >= 3 else ""
    named = len(rest) >= 2
    if method == "GET":
        verb = "watch" if "watch=" in query else ("get" if named else "list")
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(
            method, method.lower()
        )
    if sub:
        resource = f"{resource}/{sub}"
    return verb, resource


@dataclass
class CountingProxy:
    """Forwards every request to the emulator and counts it (watch responses streamed)."""

    client: str
    upstream: str
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    port: int = 0
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            connector=aiohttp.TCPConnector(limit=0),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        # Open watches hold their handlers: do not wait the default 60 s for them at exit.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()  # ends the upstream reads of open watches first
        if self._runner is not None:
            await self._runner.cleanup()

    def reset(self) -> None:
        self.counts.clear()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        self.counts[classify(request.method, request.path, request.query_string)] += 1
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        url = f"{self.upstream}{request.path_qs}"
        async with self._session.request(
            request.method, url, data=body or None, headers=headers
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for key in ("Content-Type",):
                if key in upstream.headers:
                    response.headers[key] = upstream.headers[key]
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                    if "watch=" in request.query_string:
                        await response.drain()
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
            return response


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
    #: False: every client talks to the emulator directly, with no counting proxy in this
    #: process (no request counts): the proxies double the HTTP work of this one process,
    #: which also serves the emulator, the simulator and the pod runner.
    count_requests: bool = True
    temp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="arcflow-bench-")))
    nats: NatsServer | None = None
    emulator: KubeEmulator | None = None
    simulator: ActionsSimulator | None = None
    kube: KubeClient | None = None
    pod_runner: PodRunner | None = None
    proxies: dict[str, CountingProxy] = field(default_factory=dict)
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    ars: dict[str, Any] = field(default_factory=dict)
    targets: list[Any] = field(default_factory=list)
    kubelet_task: asyncio.Task[None] | None = None
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

    def kubeconfig_for(self, client: str) -> str:
        assert self.emulator is not None
        config = self.emulator.kubeconfig()
        if client in self.proxies:
            server = f"http://127.0.0.1:{self.proxies[client].port}"
            config["clusters"][0]["cluster"]["server"] = server
        path = self.temp / f"kubeconfig-{client}"
        path.write_text(yaml.safe_dump(config))
        return str(path)

    async def start(self) -> None:
        (self.temp / "logs").mkdir(parents=True, exist_ok=True)
        self.nats = NatsServer(store_dir=str(self.temp / "nats"))
        await asyncio.to_thread(self.nats.start)
        self._exit.callback(self.nats.stop)
        self.emulator = KubeEmulator()
        await self.emulator.start()
        self._exit.push_async_callback(self.emulator.stop)
        self.simulator = ActionsSimulator(poll_timeout=self.poll_timeout)
        await self.simulator.start()
        self._exit.push_async_callback(self.simulator.stop)
        for client in CLIENTS if self.count_requests else ():
            proxy = CountingProxy(client, self.emulator.url)
            await proxy.start()
            self._exit.push_async_callback(proxy.stop)
            self.proxies[client] = proxy
        # The harness's own observer reads the emulator directly (not counted).
        self.kube = await KubeClient.from_settings(
            KubeSettings(
                kubeconfig=str(self.emulator.write_kubeconfig(self.temp / "kc")),
                qps=1000,
                burst=1000,
            )
        )
        self._exit.push_async_callback(self.kube.close)
        kubelet = await KubeClient.from_settings(
            KubeSettings(kubeconfig=self.kubeconfig_for("kubelet"), qps=1000, burst=1000)
        )
        self._exit.push_async_callback(kubelet.close)
        if not self.example and not self.real_listeners:
            self.kubelet_task = asyncio.create_task(mark_pods_running(kubelet))
            self._exit.push_async_callback(_cancel, self.kubelet_task)
            for name in SERVICES:
                await self._spawn(name)
            return
        listener_env = {
            "ARCFLOW_KUBE_KUBECONFIG": self.kubeconfig_for("listener"),
            "PYTHONUNBUFFERED": "1",
        }
        if self.listener_bytecode_cache:
            listener_env.update(
                PYTHONPYCACHEPREFIX=self.listener_bytecode_cache, PYTHONDONTWRITEBYTECODE=""
            )
            await warm_bytecode_cache(listener_env)
        self.pod_runner = PodRunner(
            kubelet,
            self.temp / "pods",
            SimulatedRunnerBackend(self.simulator, default_job_duration=1.0),
            listener_env=listener_env,
        )
        await self.pod_runner.start()
        self._exit.push_async_callback(self.pod_runner.stop)
        await self.pod_runner.wait_ready()
        for name in SERVICES:
            await self._spawn(name)
        if self.example:
            await self._apply()

    async def _spawn(self, name: str) -> None:
        assert self.nats is not None
        env = service_env(
            name,
            nats_url=self.nats.url,
            kubeconfig=self.kubeconfig_for(name),
            health_port=free_port(),
            metrics_port=free_port(),
        )
        env.update(self.env)
        log_file = (self.temp / "logs" / f"{name}.log").open("ab")
        # ARCFLOW_BENCH_PROFILE=<service>: run that service under cProfile; the profile is
        # written to <temp>/<service>.prof when it stops (SIGTERM ends it cleanly).
        profile = (
            ["-m", "cProfile", "-o", str(self.temp / f"{name}.prof")]
            if os.environ.get("ARCFLOW_BENCH_PROFILE") == name
            else []
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *profile,
            "-m",
            f"arcflow.{name}",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=set_parent_death_signal,  # no orphan if the benchmark is killed
        )
        self.processes[name] = process

        async def stop() -> None:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()
            log_file.close()

        self._exit.push_async_callback(stop)

    async def _apply(self) -> None:
        assert self.kube is not None
        assert self.simulator is not None
        raw = demo.load_example_ars(EXAMPLE)
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
        for document in (
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
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
        for proxy in self.proxies.values():
            proxy.reset()

    def counts(self) -> dict[str, dict[str, int]]:
        return {
            client: {f"{verb} {res}": n for (verb, res), n in sorted(proxy.counts.items())}
            for client, proxy in self.proxies.items()
        }

    def usage(self) -> dict[str, dict[str, float]]:
        out = {}
        for name, process in self.processes.items():
            rss, cpu = proc_usage(process.pid)
            out[name] = {"rss_mib": round(rss, 1), "cpu_seconds": round(cpu, 2)}
        return out


async def warm_bytecode_cache(env: dict[str, str]) -> None:
    """Compile the listener's modules into the cache once (what an image build does)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import arcflow.listener.lean as l; l.skip_optional_imports(); "
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
