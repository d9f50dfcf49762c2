"""One chaos stack per test: the dev stack's real parts, started so a test can break them.

What runs (the same parts as ``arcflow dev``, from :mod:`arcflow.devstack`): nats-server (one
node, or a :class:`~arcflow.devstack.nats_cluster.NatsCluster`), the Kubernetes API emulator
and the Actions simulator in this process, the pod runner (listener pods become real
``python -m arcflow.listener`` processes, runner pods simulated runners), and watcher,
registrar and reconciler as ``python -m arcflow.<service>`` subprocesses with the dev stack's
environment (:func:`arcflow.devstack.stack.service_env`).

As in ``arcflow dev``, each service runs under the dev stack's supervisor: when its process
dies (a test SIGKILLs it) it is started again after a back-off, and the restarts are counted.
The workload is one ARS with three variants and jobs spread round-robin over them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcflow.common.actions.auth import (
    KEY_APP_ID,
    KEY_INSTALLATION_ID,
    KEY_PRIVATE_KEY,
    KEY_TOKEN,
)
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.demo import VariantTarget, variant_targets
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_cluster import NatsCluster
from arcflow.devstack.nats_server import NatsServer, free_port
from arcflow.devstack.pod_runner import PodRunner, SimulatedRunnerBackend
from arcflow.devstack.stack import SERVICES
from arcflow.devstack.supervisor import ServiceProcess, Supervisor, service_env
from tests.chaos.secret_scan import SecretRecorder

NAMESPACE = "chaos"
ARS_NAME = "burst"
SECRET_NAME = "github-credentials"
VARIANTS = ("small", "large", "gpu")


def burst_ars(config_url: str, *, max_runners: int = 40) -> dict[str, Any]:
    """One ARS, three variants with their own labels and pod shapes, no idle runners."""
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}],
        }
    }
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": ARS_NAME, "namespace": NAMESPACE},
        "spec": {
            "githubConfigUrl": config_url,
            "githubConfigSecret": SECRET_NAME,
            "minRunners": 0,
            "maxRunners": max_runners,
            "template": template,
            "runnerVariants": [
                {"name": name, "runnerScaleSetLabels": ["linux", name]} for name in VARIANTS
            ],
        },
    }


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class SupervisedService:
    """One service under the dev stack's :class:`~arcflow.devstack.supervisor.Supervisor`,
    which starts it again when it dies, as a Deployment's pod would be; adds what a chaos
    test needs (SIGKILL, health polling)."""

    process: ServiceProcess
    supervisor: Supervisor
    restarts_before: int = 0

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def restarts(self) -> int:
        """Restarts since the stack was up (the chaos test's own)."""
        return self.process.restarts - self.restarts_before

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    @property
    def health_port(self) -> int:
        return self.process.health_port

    @property
    def metrics_port(self) -> int:
        return self.process.metrics_port

    def healthy(self) -> bool:
        return self.alive and _http_ok(f"http://127.0.0.1:{self.health_port}/healthz")

    async def wait_healthy(self, within: float = 30.0) -> float:
        """Seconds until ``/healthz`` answers 200 (``AssertionError`` after ``within``)."""
        began = time.monotonic()
        while time.monotonic() - began < within:
            if await asyncio.to_thread(self.healthy):
                return time.monotonic() - began
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.name} not healthy within {within}s: {self.process.status}")

    def kill(self) -> None:
        """SIGKILL the current process; the supervisor starts a new one."""
        process = self.process.process
        assert process is not None
        assert process.returncode is None
        process.send_signal(signal.SIGKILL)


@dataclass
class ChaosStack:
    """``async with ChaosStack(tmp_path) as stack:`` every part running, the ARS applied and
    its three scale sets registered with a listener session each."""

    work_dir: Path
    cluster_size: int = 1
    auth: str = "pat"
    poll_timeout: float = 2.0
    service_env_extra: dict[str, str] = field(default_factory=dict)
    nats: NatsServer | None = None
    cluster: NatsCluster | None = None
    emulator: KubeEmulator | None = None
    sim: ActionsSimulator | None = None
    kube: KubeClient | None = None
    pod_runner: PodRunner | None = None
    services: dict[str, SupervisedService] = field(default_factory=dict)
    targets: list[VariantTarget] = field(default_factory=list)
    #: Every credential value the stack handed out (for the secret scan).
    credentials: dict[str, str] = field(default_factory=dict)
    secrets: SecretRecorder = field(default_factory=SecretRecorder)
    _exit: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    # --- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> ChaosStack:
        try:
            await self._start()
        except BaseException:
            await self._exit.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._exit.aclose()

    @property
    def nats_url(self) -> str:
        if self.cluster is not None:
            return self.cluster.url
        assert self.nats is not None
        return self.nats.url

    @property
    def credentials_secret(self) -> str:
        return SECRET_NAME

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    async def _start(self) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if self.cluster_size > 1:
            self.cluster = NatsCluster(size=self.cluster_size)
            self._exit.callback(self.cluster.stop)
            await asyncio.to_thread(self.cluster.start)
            self.service_env_extra.setdefault("ARCFLOW_NATS_REPLICAS", str(self.cluster_size))
        else:
            self.nats = NatsServer(store_dir=str(self.work_dir / "nats"))
            self._exit.callback(self.nats.stop)
            await asyncio.to_thread(self.nats.start)

        self.emulator = KubeEmulator(history_limit=5000)
        self._exit.push_async_callback(self._stop_emulator)
        await self.emulator.start()
        kubeconfig = str(self.emulator.write_kubeconfig(self.work_dir / "kubeconfig"))

        self.sim = ActionsSimulator(poll_timeout=self.poll_timeout)
        self._exit.push_async_callback(self.sim.stop)
        await self.sim.start()
        secret_data = self._credentials()
        self.secrets.attach(self)

        self.kube = await KubeClient.from_settings(
            KubeSettings(kubeconfig=kubeconfig, qps=1000, burst=1000, request_timeout=10)
        )
        self._exit.push_async_callback(self.kube.close)

        self.pod_runner = PodRunner(
            self.kube,
            self.work_dir / "pods",
            SimulatedRunnerBackend(self.sim, default_job_duration=0.2),
            listener_env={"ARCFLOW_KUBE_KUBECONFIG": kubeconfig, "PYTHONUNBUFFERED": "1"},
        )
        self._exit.push_async_callback(self.pod_runner.stop)
        await self.pod_runner.start()
        await self.pod_runner.wait_ready()

        for name in SERVICES:
            health_port, metrics_port = free_port(), free_port()
            env = service_env(
                name,
                nats_url=self.nats_url,
                kubeconfig=kubeconfig,
                health_port=health_port,
                metrics_port=metrics_port,
            )
            env.update(self.service_env_extra)
            process = ServiceProcess(
                name, self.logs_dir / f"{name}.log", health_port, metrics_port, env=env
            )
            supervisor = Supervisor(process, on_status=lambda _service: None)
            self.services[name] = SupervisedService(process, supervisor)
        self._exit.push_async_callback(self._stop_services)
        await asyncio.gather(*(s.supervisor.start() for s in self.services.values()))
        # Generous: a port another process took between free_port() and the bind makes a
        # service crash-loop until the port is free again (a shared machine, not arcflow).
        await asyncio.gather(*(s.wait_healthy(within=120) for s in self.services.values()))

        ars = burst_ars(self.sim.config_url())
        self.targets = variant_targets(ars)
        await self.kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET_NAME, "namespace": NAMESPACE},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in secret_data.items()},
            }
        )
        await self.kube.create(ars)
        await self.wait_sessions()
        for service in self.services.values():  # restarts before any fault are not counted
            service.restarts_before = service.restarts

    def _credentials(self) -> dict[str, str]:
        assert self.sim is not None
        if self.auth == "pat":
            token = self.sim.add_pat()
            self.credentials["PAT"] = token
            return {KEY_TOKEN: token}
        app = self.sim.add_github_app()
        self.credentials["GitHub App private key"] = app.private_key
        return {
            KEY_APP_ID: str(app.app_id),
            KEY_INSTALLATION_ID: str(app.installation_id),
            KEY_PRIVATE_KEY: app.private_key,
        }

    async def _stop_services(self) -> None:
        await asyncio.gather(*(s.supervisor.stop() for s in self.services.values()))

    async def _stop_emulator(self) -> None:
        if self.emulator is not None:
            await self.emulator.stop()

    # --- what the world looks like ------------------------------------------------------

    def scale_sets(self) -> list[dict[str, Any]]:
        assert self.sim is not None
        return list(self.sim.snapshot()["scaleSets"])

    def scale_set_id(self, target: VariantTarget) -> int:
        """The simulator's id of ``target``'s scale set (exactly one must exist)."""
        (found,) = [s["id"] for s in self.scale_sets() if s["name"] == target.scale_set_name]
        return int(found)

    async def wait_sessions(self, within: float = 60.0) -> None:
        """Every variant has its scale set and a live listener session."""
        names = {t.scale_set_name for t in self.targets}
        began = time.monotonic()
        while time.monotonic() - began < within:
            with_session = {s["name"] for s in self.scale_sets() if s.get("session")}
            if names <= with_session:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(
            f"no session for {sorted(names - with_session)} within {within}s; "
            f"services: {self.service_states()}"
        )

    def service_states(self) -> Mapping[str, str]:
        return {name: f"alive={s.alive} restarts={s.restarts}" for name, s in self.services.items()}

    def listener_pids(self) -> list[int]:
        assert self.pod_runner is not None
        return self.pod_runner.running_processes

    def log_files(self) -> list[Path]:
        files = sorted(self.logs_dir.glob("*.log"))
        return files + sorted((self.work_dir / "pods").glob("*/listener.log"))


__all__ = [
    "ARS_NAME",
    "NAMESPACE",
    "SECRET_NAME",
    "VARIANTS",
    "ChaosStack",
    "SupervisedService",
    "burst_ars",
]
