"""One chaos stack per test: the dev stack's real parts, started so a test can break them.

The stack comes from :class:`arcflow.devstack.factory.StackFactory`, as ``arcflow dev``'s does:
nats-server (one node, or a :class:`~arcflow.devstack.nats_cluster.NatsCluster`), Kubernetes
(the test session's real kube-apiserver, in namespaces of the stack's own, or the API
emulator where a test needs a fault only it can give), the Actions simulator in this process,
the pod runner (listener pods become real ``python -m arcflow.listener`` processes, runner
pods simulated runners; on the real server it plays kubelet), and watcher, registrar and
reconciler as ``python -m arcflow.<service>`` subprocesses.

As in ``arcflow dev``, each service runs under the dev stack's supervisor: when its process
dies (a test SIGKILLs it) it is started again after a back-off, and the restarts are counted.
The workload is one ARS with three variants and jobs spread round-robin over them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcflow.common.actions.auth import (
    KEY_APP_ID,
    KEY_INSTALLATION_ID,
    KEY_PRIVATE_KEY,
    KEY_TOKEN,
)
from arcflow.common.constants import ANNOTATION_SCALE_SET_IDS
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.demo import VariantTarget, variant_targets
from arcflow.devstack.factory import ApiProxy, Service, StackFactory, StackStartError
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_cluster import NatsCluster
from arcflow.devstack.nats_server import NatsServer
from arcflow.devstack.pod_runner import PodRunner
from arcflow.devstack.supervisor import ServiceProcess, last_log_line
from tests.chaos.secret_scan import SecretRecorder
from tests.polling import eventually

NAMESPACE = "chaos"
ARS_NAME = "burst"
SECRET_NAME = "github-credentials"
VARIANTS = ("small", "large", "gpu")


def burst_ars(
    config_url: str, *, max_runners: int = 40, namespace: str = NAMESPACE
) -> dict[str, Any]:
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
        "metadata": {"name": ARS_NAME, "namespace": namespace},
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


@dataclass
class SupervisedService:
    """One service of the stack (:class:`arcflow.devstack.factory.Service`: under the dev
    stack's supervisor, which starts it again when it dies, as a Deployment's pod would be),
    with its restarts counted from the moment the stack was up."""

    service: Service
    restarts_before: int = 0

    @property
    def process(self) -> ServiceProcess:
        return self.service.process

    @property
    def name(self) -> str:
        return self.service.name

    @property
    def restarts(self) -> int:
        """Restarts since the stack was up (the chaos test's own)."""
        return self.service.restarts - self.restarts_before

    @property
    def alive(self) -> bool:
        return self.service.alive

    @property
    def log_path(self) -> Path:
        return self.service.log_path

    @property
    def health_port(self) -> int:
        return self.service.health_port

    @property
    def metrics_port(self) -> int:
        return self.service.metrics_port

    def healthy(self) -> bool:
        return self.service.healthy()

    async def wait_healthy(self, within: float = 30.0) -> float:
        """Seconds until ``/healthz`` answers 200 (``AssertionError`` after ``within``)."""
        try:
            return await self.service.wait_healthy(within)
        except StackStartError as exc:
            raise AssertionError(str(exc)) from None

    def kill(self) -> None:
        """SIGKILL the current process; the supervisor starts a new one."""
        self.service.kill()


@dataclass
class ChaosStack:
    """``async with ChaosStack(tmp_path, kube=control_plane) as stack:`` every part running
    (:class:`~arcflow.devstack.factory.StackFactory`), the ARS applied and its three scale
    sets registered with a listener session each.

    ``kube`` is the test session's :class:`~arcflow.devstack.control_plane.ControlPlane` (the
    stack then works in namespaces of its own, deleted at the end) or ``"emulator"``.
    ``proxy`` puts the factory's :class:`~arcflow.devstack.factory.ApiProxy` between every
    client (services, pod runner, listeners) and the server, for injected HTTP faults."""

    work_dir: Path
    kube_backend: ControlPlane | str = "emulator"
    cluster_size: int = 1
    auth: str = "pat"
    poll_timeout: float = 2.0
    proxy: bool = False
    service_env_extra: dict[str, str] = field(default_factory=dict)
    #: Changes the ARS before it is applied (a variant's own image, annotations).
    ars_edit: Callable[[dict[str, Any]], None] | None = None
    namespace: str = NAMESPACE
    nats: NatsServer | None = None
    cluster: NatsCluster | None = None
    emulator: KubeEmulator | None = None
    control_plane: ControlPlane | None = None
    api_proxy: ApiProxy | None = None
    sim: ActionsSimulator | None = None
    kube: KubeClient | None = None
    #: The admin kubeconfig of the stack's Kubernetes (``arcflow doctor`` reads it).
    kubeconfig: str = ""
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

    @property
    def on_real_server(self) -> bool:
        return self.control_plane is not None

    async def _start(self) -> None:
        shared = not isinstance(self.kube_backend, str)
        if shared:  # a namespace of its own on the session's server
            self.namespace = f"{NAMESPACE}-{secrets.token_hex(3)}"
        factory = StackFactory(
            kube=self.kube_backend,
            nats_nodes=self.cluster_size,
            poll_timeout=self.poll_timeout,
            job_duration=0.2,
            service_env=self.service_env_extra,
            # restart_nats waits for a scale.decision of every variant after the restart; an
            # idle one comes once per decision heartbeat (ADR 0061), so keep that short here.
            listener_env={"ARCFLOW_LISTENER_DECISION_HEARTBEAT_SECONDS": "2"},
            controller_namespace=f"{self.namespace}-systems" if shared else "arc-systems",
            namespaces=[self.namespace],
            proxy=self.proxy,
            emulator_history=5000,
            # Generous: a port another process took between free_port() and the bind makes
            # a service crash-loop until the port is free again (a shared machine).
            healthy_within=120,
            kube_request_timeout=10,
            work_dir=self.work_dir,
        )
        parts = await self._exit.enter_async_context(factory)
        self.nats, self.cluster = parts.nats, parts.nats_cluster
        self.emulator, self.control_plane = parts.emulator, parts.control_plane
        self.api_proxy, self.kube = parts.proxy, parts.kube
        self.kubeconfig = parts.kubeconfig
        self.sim, self.pod_runner = parts.simulator, parts.pod_runner
        self.services = {n: SupervisedService(s) for n, s in parts.services.items()}
        assert self.sim is not None
        secret_data = self._credentials()
        self.secrets.attach(self)

        ars = burst_ars(self.sim.config_url(), namespace=self.namespace)
        if self.ars_edit is not None:
            self.ars_edit(ars)
        self.targets = variant_targets(ars)
        await self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET_NAME, "namespace": self.namespace},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in secret_data.items()},
            }
        )
        await self.kube.create(ars)
        await self.wait_sessions()
        for service in self.services.values():  # restarts before any fault are not counted
            service.restarts_before = service.service.restarts

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

    # --- what the world looks like ------------------------------------------------------

    def scale_sets(self) -> list[dict[str, Any]]:
        assert self.sim is not None
        return list(self.sim.snapshot()["scaleSets"])

    def scale_set_id(self, target: VariantTarget) -> int:
        """The simulator's id of ``target``'s scale set (exactly one must exist)."""
        (found,) = [s["id"] for s in self.scale_sets() if s["name"] == target.scale_set_name]
        return int(found)

    async def registered_again(self, target: VariantTarget, old_id: int, within: float) -> int:
        """The id of ``target``'s scale set once it exists again under its name, after GitHub
        deleted ``old_id``."""

        async def found() -> int:
            ids = [s["id"] for s in self.scale_sets() if s["name"] == target.scale_set_name]
            assert ids, f"no scale set named {target.scale_set_name}"
            assert ids != [old_id], f"scale sets named {target.scale_set_name}: {ids}"
            return int(ids[0])

        return int(await eventually(found, within=within, what="the scale set again"))

    async def wait_id_mirrored(self, variant: str, scale_set_id: int, within: float) -> None:
        """The ARS's scale set ids annotation gives ``variant`` the id ``scale_set_id``."""
        assert self.kube is not None

        async def mirrored() -> bool:
            assert self.kube is not None
            ars = await self.kube.get(AUTOSCALING_RUNNER_SET, ARS_NAME, self.namespace)
            annotations = ars["metadata"].get("annotations") or {}
            ids = json.loads(annotations.get(ANNOTATION_SCALE_SET_IDS) or "{}")
            wanted = f"{ANNOTATION_SCALE_SET_IDS}: {ids} (want {scale_set_id})"
            assert ids.get(variant) == scale_set_id, wanted
            return True

        await eventually(mirrored, within=within, what="the new id in the ARS annotations")

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
            f"services: {self.service_states()}; last reconciler log line: "
            f"{last_log_line(self.logs_dir / 'reconciler.log') or '(none)'}"
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
