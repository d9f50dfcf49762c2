"""One way to bring up a whole arcflow stack: NATS, Kubernetes, the Actions simulator, the pod
runner and the services, with the Kubernetes backend as a parameter.

``arcflow dev`` (:mod:`arcflow.devstack.stack`), the chaos suite, the benchmarks and the tests
all start their parts here::

    async with StackFactory(kube="apiserver", services=("watcher", "reconciler")) as parts:
        parts.kube          # a KubeClient as the admin (never through the proxy)
        parts.simulator     # the Actions simulator
        parts.services["reconciler"].wait_healthy()

``kube`` is ``"emulator"`` (the in-process API emulator), ``"apiserver"`` (a real etcd,
kube-apiserver and kube-controller-manager of :mod:`arcflow.devstack.control_plane`, stopped
with the stack), a :class:`~arcflow.devstack.control_plane.ControlPlane` that is already
running (shared by a test session: the stack leaves it running and deletes the namespaces it
created there), or the path of a kubeconfig (an outside cluster, used as it is).

``identities=True`` (a real server of this repository's own control plane only): each service
runs as the ServiceAccount its chart gives it (:mod:`arcflow.devstack.identities`: ``helm
template`` of the umbrella chart, its ServiceAccounts and RBAC applied, a TokenRequest token in
the service's kubeconfig), so the audit log names ``system:serviceaccount:<ns>:<sa>`` per
service. The pod runner (the kubelet stand-in) stays the admin; listeners always get their
pod's own ServiceAccount token.

:meth:`StackFactory._start` is the start order, one step after the other, each pushed on one
:class:`contextlib.AsyncExitStack`, so the stop runs in exact reverse order whatever failed (a
start that fails or is cancelled half way stops what had started, then raises).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import signal
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from arcflow.common.kube import (
    NAMESPACE,
    POD,
    SERVICE_ACCOUNT,
    ConflictError,
    KubeClient,
    KubeSettings,
    NotFoundError,
)
from arcflow.devstack.child_process import last_log_line
from arcflow.devstack.factory.proxy import ApiProxy, Upstream
from arcflow.devstack.nats_server import NatsServer, free_port
from arcflow.devstack.supervisor import ServiceProcess, Supervisor, service_env

if TYPE_CHECKING:
    from arcflow.devstack.actions_sim import ActionsSimulator
    from arcflow.devstack.control_plane import ControlPlane
    from arcflow.devstack.identities import Identity
    from arcflow.devstack.kube_emulator import KubeEmulator
    from arcflow.devstack.nats_cluster import NatsCluster
    from arcflow.devstack.pod_runner import PodRunner

log = logging.getLogger(__name__)

SERVICES: tuple[str, ...] = ("watcher", "registrar", "reconciler")
EMULATOR = "emulator"
APISERVER = "apiserver"
EXTERNAL = "external"
#: The reconciler's controller namespace (its listeners and their config Secrets). A real
#: cluster has none until an installer makes it; the factory does, as the chart would.
CONTROLLER_NAMESPACE = "arc-systems"
CONTROLLER_NAMESPACE_ENV = "ARCFLOW_RECONCILER_CONTROLLER_NAMESPACE"
#: The clients that get a port of their own on the proxy (``proxy=True``).
PROXY_CLIENTS: tuple[str, ...] = (*SERVICES, "listener", "kubelet")
#: A new namespace gets its ``default`` ServiceAccount from kube-controller-manager about a
#: second later; pods naming it are refused until then.
NAMESPACE_READY_SECONDS = 30.0
#: How long the stop waits for the pods of the namespaces it deletes on a shared server (the
#: pod runner confirms their deletion, as a kubelet does; without it they would stay).
NAMESPACE_DRAIN_SECONDS = 20.0

T = TypeVar("T")


class StackStartError(RuntimeError):
    """A part of the stack did not come up (the message says which, and why)."""


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (loopback)
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class Service:
    """One service process under the dev stack's supervisor (started again when it dies, as
    a Deployment's pod would be)."""

    process: ServiceProcess
    supervisor: Supervisor

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def restarts(self) -> int:
        return self.process.restarts

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
        """Seconds until ``/healthz`` answers 200; :class:`StackStartError` after ``within``
        with the status and the last log line."""
        began = time.monotonic()
        while time.monotonic() - began < within:
            if await asyncio.to_thread(self.healthy):
                return time.monotonic() - began
            await asyncio.sleep(0.1)
        raise StackStartError(
            f"{self.name} not healthy within {within:.0f}s: {self.process.status}; "
            f"last log line: {last_log_line(self.log_path) or '(none)'} ({self.log_path})"
        )

    def kill(self) -> None:
        """SIGKILL the current process; the supervisor starts a new one."""
        process = self.process.process
        assert process is not None
        assert process.returncode is None
        process.send_signal(signal.SIGKILL)


@dataclass
class StackParts:
    """What a started stack consists of (a part that was not asked for is ``None``)."""

    temp: Path
    nats_url: str
    kube_backend: str
    #: The admin kubeconfig (``system:masters`` on a real server).
    kubeconfig: str
    kube: KubeClient
    nats: NatsServer | None = None
    nats_cluster: NatsCluster | None = None
    control_plane: ControlPlane | None = None
    emulator: KubeEmulator | None = None
    proxy: ApiProxy | None = None
    simulator: ActionsSimulator | None = None
    pod_runner: PodRunner | None = None
    services: dict[str, Service] = field(default_factory=dict)
    #: Namespaces the factory created (the controller namespace first).
    namespaces: list[str] = field(default_factory=list)
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    #: ``identities=True``: each service's ServiceAccount (its audit-log user name).
    identities: dict[str, Identity] = field(default_factory=dict)
    #: The stack's own NATS identity where the server checks one (the node's release: its
    #: auditor); ``None``: the dev nats-server, which has no users.
    nats_user: str | None = None
    nats_password: str | None = None

    @property
    def on_real_server(self) -> bool:
        return self.kube_backend != EMULATOR

    def kubeconfig_for(self, client: str) -> str:
        """The kubeconfig ``client`` uses: its proxy port's, else the admin one."""
        return self.kubeconfigs.get(client, self.kubeconfig)


StatusCallback = Callable[[str, str], None]


@dataclass
class StartsInOrder:
    """``async with builder as parts:``: :meth:`_start` pushes each part's stop on ``_exit`` as
    it starts it; a start that fails or is cancelled stops what had started, then raises. Shared
    by :class:`StackFactory` and the node's :class:`~arcflow.devstack.node.stack.NodeStack`."""

    _exit: contextlib.AsyncExitStack = field(
        default_factory=contextlib.AsyncExitStack, init=False, repr=False
    )

    async def _start(self) -> StackParts:
        raise NotImplementedError

    async def __aenter__(self) -> StackParts:
        try:
            return await self._start()
        except BaseException:
            await self.aclose()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop everything in reverse start order; safe to call twice."""
        exit_stack, self._exit = self._exit, contextlib.AsyncExitStack()
        await exit_stack.aclose()


@dataclass
class StackFactory(StartsInOrder):
    """``async with StackFactory(...) as parts:`` every asked-for part running."""

    #: ``"emulator"``, ``"apiserver"``, a running ControlPlane (shared), or a kubeconfig path.
    kube: str | Path | ControlPlane = EMULATOR
    #: nats-server nodes: 1, or a JetStream cluster of that many (streams get that many
    #: replicas: ``ARCFLOW_NATS_REPLICAS`` goes to the services).
    nats_nodes: int = 1
    simulator: bool = True
    #: Seconds the simulator holds an empty message poll (GitHub: about 50).
    poll_timeout: float = 5.0
    pod_runner: bool = True
    #: A simulated runner's job duration when the job names none.
    job_duration: float = 1.0
    services: Sequence[str] = SERVICES
    #: Environment for every service (over :func:`~arcflow.devstack.supervisor.service_env`).
    service_env: Mapping[str, str] = field(default_factory=dict)
    #: Extra ``python`` arguments per service, before ``-m arcflow.<name>`` (a profiler).
    service_python_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Extra environment of listener processes (under their pod's own env).
    listener_env: Mapping[str, str] = field(default_factory=dict)
    #: Created before the services (waited for until it has its ``default`` ServiceAccount
    #: on a real server) and given to the reconciler; ``None``: neither.
    controller_namespace: str | None = CONTROLLER_NAMESPACE
    #: More namespaces to create the same way (the ARS's, a test's).
    namespaces: Sequence[str] = ()
    #: A proxy (:class:`ApiProxy`) in front of the server for every client but the
    #: stack's own KubeClient: counts requests per client, injects faults.
    proxy: bool = False
    #: ``apiserver``: a JSON audit log naming the user of every request.
    audit: bool = False
    #: Each service as its chart's ServiceAccount (needs helm and a control plane of this
    #: repository's own: ``"apiserver"`` or a shared ControlPlane); False: all as the admin.
    identities: bool = False
    emulator_history: int = 1000
    #: Wait until every service answers ``/healthz`` (seconds; ``None``: the supervisor's
    #: own short wait, and a service that does not answer keeps starting).
    healthy_within: float | None = None
    #: The Node the pod runner registers on a real server (unique per stack by default on a
    #: shared one, so two stacks never share a Node or its Lease).
    node_name: str | None = None
    kube_qps: float = 1000
    kube_burst: int = 1000
    kube_request_timeout: float | None = None
    #: The folder for logs, stores and pods (made if missing, kept); ``None``: a temp dir
    #: removed at the end unless ``keep_temp``.
    work_dir: Path | None = None
    keep_temp: bool = False
    #: ``(component, status)`` as each part starts (the dev stack's view).
    on_status: StatusCallback | None = None
    on_service_status: Callable[[ServiceProcess], None] | None = None
    parts: StackParts | None = field(default=None, init=False)

    # --- the start order ------------------------------------------------------------------

    async def _start(self) -> StackParts:
        temp = self._work_dir()
        nats_url = await self._start_nats(temp)
        backend, kubeconfig = await self._start_kube(temp)
        parts = self.parts = StackParts(
            temp=temp,
            nats_url=nats_url,
            kube_backend=backend,
            kubeconfig=kubeconfig,
            kube=await self._admin_client(kubeconfig),
            nats=self._nats,
            nats_cluster=self._cluster,
            control_plane=self._plane,
            emulator=self._emulator,
        )
        if self.proxy:
            parts.proxy = await self._start_proxy(parts)
        if self.simulator:
            parts.simulator = await self._start_simulator()
        parts.namespaces = await self._create_namespaces(parts)
        if self.pod_runner:
            parts.pod_runner = await self._start_pod_runner(parts)
        if parts.namespaces and self._shares_cluster(backend):
            # Runs after the services stopped and before the pod runner does: it confirms
            # the deletion of the pods it played there, as a kubelet would.
            self._exit.push_async_callback(self._delete_namespaces, parts)
        if self.identities:
            parts.identities = await self._apply_identities(parts)
        parts.services = await self._start_services(parts)
        return parts

    # --- the steps --------------------------------------------------------------------------

    _nats: NatsServer | None = field(default=None, init=False, repr=False)
    _cluster: NatsCluster | None = field(default=None, init=False, repr=False)
    _plane: ControlPlane | None = field(default=None, init=False, repr=False)
    _emulator: KubeEmulator | None = field(default=None, init=False, repr=False)

    def _status(self, component: str, status: str) -> None:
        if self.on_status is not None:
            self.on_status(component, status)

    def _work_dir(self) -> Path:
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            temp = self.work_dir
        else:
            temp = Path(tempfile.mkdtemp(prefix="arcflow-stack-"))
            if not self.keep_temp:
                self._exit.callback(shutil.rmtree, temp, True)
        (temp / "logs").mkdir(exist_ok=True)
        return temp

    async def _start_nats(self, temp: Path) -> str:
        self._status("nats", "starting")
        if self.nats_nodes > 1:
            from arcflow.devstack.nats_cluster import NatsCluster

            cluster = self._cluster = NatsCluster(size=self.nats_nodes)
            self._exit.callback(cluster.stop)
            await _in_thread(cluster.start)
            url = cluster.url
        else:
            server = self._nats = NatsServer(store_dir=str(temp / "nats"))
            self._exit.callback(server.stop)
            await _in_thread(server.start)
            url = server.url
        self._status("nats", f"running {url}")
        return url

    async def _start_kube(self, temp: Path) -> tuple[str, str]:
        """(backend, admin kubeconfig)."""
        from arcflow.devstack.control_plane import ControlPlane, ControlPlaneError

        if isinstance(self.kube, ControlPlane):
            self._plane = self.kube
            self._status("kubernetes", f"shared kube-apiserver {self.kube.version}")
            return APISERVER, str(self.kube.kubeconfig)
        if self.kube == APISERVER:
            self._status("kubernetes", "starting kube-apiserver")
            plane = self._plane = ControlPlane(folder=temp / "kube", audit=self.audit)
            self._exit.callback(plane.stop)
            try:
                await _in_thread(plane.start)
            except ControlPlaneError as exc:
                raise StackStartError(
                    f"the Kubernetes control plane did not start: {exc}"
                ) from None
            self._status("kubernetes", f"running kube-apiserver {plane.version} {plane.url}")
            return APISERVER, str(plane.kubeconfig)
        if self.kube == EMULATOR:
            from arcflow.devstack.kube_emulator import KubeEmulator

            emulator = self._emulator = KubeEmulator(history_limit=self.emulator_history)
            self._exit.push_async_callback(emulator.stop)
            await emulator.start()
            self._status("kubernetes", f"running emulator {emulator.url}")
            return EMULATOR, str(emulator.write_kubeconfig(temp / "kubeconfig"))
        path = Path(self.kube)  # an outside cluster's kubeconfig, used as it is
        self._status("kubernetes", f"external ({path})")
        return EXTERNAL, str(path)

    async def _admin_client(self, kubeconfig: str) -> KubeClient:
        settings = KubeSettings(kubeconfig=kubeconfig, qps=self.kube_qps, burst=self.kube_burst)
        if self.kube_request_timeout is not None:
            settings.request_timeout = self.kube_request_timeout
        client = await KubeClient.from_settings(settings)
        self._exit.push_async_callback(client.close)
        return client

    async def _start_proxy(self, parts: StackParts) -> ApiProxy:
        proxy = ApiProxy(Upstream.from_kubeconfig(parts.kubeconfig), PROXY_CLIENTS)
        self._exit.push_async_callback(proxy.stop)
        await proxy.start()
        for client in PROXY_CLIENTS:
            path = proxy.kubeconfig(client, parts.temp / f"kubeconfig-{client}")
            parts.kubeconfigs[client] = str(path)
        return proxy

    async def _start_simulator(self) -> ActionsSimulator:
        from arcflow.devstack.actions_sim import ActionsSimulator

        simulator = ActionsSimulator(poll_timeout=self.poll_timeout)
        self._exit.push_async_callback(simulator.stop)
        await simulator.start()
        self._status("github", f"running simulator {simulator.base_url}")
        return simulator

    async def _create_namespaces(self, parts: StackParts) -> list[str]:
        """Create the controller namespace and the others; on a real server wait for each
        one's ``default`` ServiceAccount. Returns those this stack created."""
        wanted = [n for n in (self.controller_namespace, *self.namespaces) if n]
        created: list[str] = []
        for name in dict.fromkeys(wanted):
            with contextlib.suppress(ConflictError):
                await parts.kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )
                created.append(name)
        if parts.on_real_server:
            deadline = time.monotonic() + NAMESPACE_READY_SECONDS
            for name in dict.fromkeys(wanted):
                while True:
                    try:
                        await parts.kube.get(SERVICE_ACCOUNT, "default", name)
                        break
                    except NotFoundError:
                        if time.monotonic() > deadline:
                            raise StackStartError(
                                f"namespace {name} got no default ServiceAccount within "
                                f"{NAMESPACE_READY_SECONDS:.0f}s (is kube-controller-manager "
                                "running?)"
                            ) from None
                        await asyncio.sleep(0.1)
        return created

    async def _start_pod_runner(self, parts: StackParts) -> PodRunner:
        from arcflow.devstack.kubelet import DEFAULT_NODE_NAME
        from arcflow.devstack.pod_runner import PodRunner
        from arcflow.devstack.runner_backend import SimulatedRunnerBackend

        node = self.node_name
        if node is None and self._shares_cluster(parts.kube_backend):
            node = f"arcflow-node-{secrets.token_hex(3)}"
        kubelet = parts.kubeconfig_for("kubelet")
        runner_kube = parts.kube
        if kubelet != parts.kubeconfig:  # the kubelet's own requests go through the proxy
            runner_kube = await self._admin_client(kubelet)
        backend = (
            SimulatedRunnerBackend(parts.simulator, default_job_duration=self.job_duration)
            if parts.simulator is not None
            else None
        )
        runner = PodRunner(
            runner_kube,
            parts.temp / "pods",
            backend,
            # NATS is not here: a listener gets it from its pod spec (the reconciler's
            # ARCFLOW_RECONCILER_LISTENER_NATS_URL). On the emulator (no RBAC) listeners use
            # this node-level kubeconfig; on a real server each gets its pod's ServiceAccount
            # token in a kubeconfig built from the kubelet's (the same server or proxy port).
            listener_env={
                "ARCFLOW_KUBE_KUBECONFIG": parts.kubeconfig_for("listener"),
                "PYTHONUNBUFFERED": "1",
                **self.listener_env,
            },
            kubeconfig=kubelet if parts.kube_backend != EXTERNAL else None,
            node_name=node or DEFAULT_NODE_NAME,
        )
        if node is not None and self._shares_cluster(parts.kube_backend):
            # Deleted after the runner stopped (a running one registers it again).
            self._exit.push_async_callback(_delete_node, kubelet, node)
        self._exit.push_async_callback(runner.stop)
        await runner.start()
        await runner.wait_ready()
        self._status(
            "pod runner", f"running (node {runner.node.name})" if runner.node else "running"
        )
        return runner

    async def _apply_identities(self, parts: StackParts) -> dict[str, Identity]:
        """The chart's identities of the services, released into the controller namespace
        with cluster-wide RBAC; each service's kubeconfig becomes its own (through its proxy
        port when there is a proxy: the proxy forwards a token as it is)."""
        from arcflow.devstack.identities import CHART_SERVICES, IdentityError, KubeIdentities

        plane = parts.control_plane
        if plane is None or not self.controller_namespace:
            raise StackStartError(
                "identities=True needs this repository's control plane (kube='apiserver' or "
                "a ControlPlane) and a controller namespace"
            )
        shared = self._shares_cluster(parts.kube_backend)
        release = f"arcflow-{secrets.token_hex(3)}" if shared else "arcflow"
        ids = KubeIdentities(plane, parts.temp / "identities")
        if shared:  # the cluster-scoped RBAC outlives the stack otherwise
            self._exit.push_async_callback(asyncio.to_thread, ids.close)
        wanted = [s for s in self.services if s in CHART_SERVICES]
        self._status("identities", f"applying the chart's ServiceAccounts ({release})")
        try:
            identities = await asyncio.to_thread(
                ids.from_charts,
                release=release,
                namespace=self.controller_namespace,
                controller_namespace=self.controller_namespace,
                services=wanted,
            )
        except IdentityError as exc:
            raise StackStartError(f"the services' identities: {exc}") from None
        for name, identity in identities.items():
            path = identity.kubeconfig
            if parts.proxy is not None:
                path = identity.kubeconfig_via(
                    parts.proxy.url(name), parts.temp / f"kubeconfig-{name}-sa"
                )
            parts.kubeconfigs[name] = str(path)
        self._status("identities", ", ".join(f"{n}: {i.username}" for n, i in identities.items()))
        return identities

    async def _start_services(self, parts: StackParts) -> dict[str, Service]:
        services: dict[str, Service] = {}
        for name in self.services:
            health_port, metrics_port = free_port(), free_port()
            env = service_env(
                name,
                nats_url=parts.nats_url,
                kubeconfig=parts.kubeconfig_for(name),
                health_port=health_port,
                metrics_port=metrics_port,
            )
            if self.nats_nodes > 1:
                env["ARCFLOW_NATS_REPLICAS"] = str(self.nats_nodes)
            if name == "reconciler" and self.controller_namespace:
                env[CONTROLLER_NAMESPACE_ENV] = self.controller_namespace
            env.update(self.service_env)
            process = ServiceProcess(
                name, parts.temp / "logs" / f"{name}.log", health_port, metrics_port, env=env
            )
            process.python_args = tuple(self.service_python_args.get(name, ()))
            supervisor = Supervisor(process, on_status=self._on_service)
            services[name] = Service(process, supervisor)
        # Registered before they start: an interrupted start still stops what did start.
        self._exit.push_async_callback(_stop_all, list(services.values()))
        await asyncio.gather(*(s.supervisor.start() for s in services.values()))
        if self.healthy_within is not None:
            within = self.healthy_within
            await asyncio.gather(*(s.wait_healthy(within) for s in services.values()))
        return services

    def _on_service(self, process: ServiceProcess) -> None:
        if self.on_service_status is not None:
            self.on_service_status(process)

    # --- a cluster the stack does not own ---------------------------------------------------

    def _shares_cluster(self, backend: str) -> bool:
        """The cluster outlives the stack (a shared control plane, an outside cluster)."""
        return backend == EXTERNAL or (backend == APISERVER and self.kube != APISERVER)

    async def _delete_namespaces(self, parts: StackParts) -> None:
        """Delete what the stack created on a cluster it shares, and wait (bounded) until the
        pods there are gone: the pod runner still runs and confirms their deletion."""
        for name in parts.namespaces:
            with contextlib.suppress(NotFoundError):
                await parts.kube.delete(NAMESPACE, name)
        if parts.pod_runner is None:
            return
        deadline = time.monotonic() + NAMESPACE_DRAIN_SECONDS
        left: list[str] = []
        while time.monotonic() < deadline:
            left = []
            for name in parts.namespaces:
                with contextlib.suppress(Exception):
                    left += [
                        p["metadata"]["name"]
                        for p in (await parts.kube.list(POD, namespace=name)).items
                    ]
            if not left:
                return
            await asyncio.sleep(0.2)
        log.warning("pods still there after deleting the stack's namespaces: %s", left[:10])


async def _delete_node(kubeconfig: str, node: str) -> None:
    """The Node a pod runner registered on a shared cluster (its Lease goes with it)."""
    from arcflow.devstack.kubelet import ApiCaller

    api = ApiCaller.from_kubeconfig(kubeconfig)
    try:
        with contextlib.suppress(Exception):  # best effort: the cluster may be going too
            await api.request("DELETE", f"/api/v1/nodes/{node}")
    finally:
        await api.close()


async def _in_thread(start: Callable[[], T]) -> T:
    """A synchronous start (subprocesses, short polls) in a thread. A thread cannot be
    cancelled: an interrupted start waits for it, so the stop that follows finds the process
    it must stop."""
    started = asyncio.ensure_future(asyncio.to_thread(start))
    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await started
        raise


async def _stop_all(services: list[Service]) -> None:
    """Stop supervising and SIGTERM every service at once, SIGKILL after a grace period."""
    await asyncio.gather(*(s.supervisor.stop() for s in reversed(services)))


__all__ = [
    "APISERVER",
    "CONTROLLER_NAMESPACE",
    "EMULATOR",
    "EXTERNAL",
    "PROXY_CLIENTS",
    "SERVICES",
    "ApiProxy",
    "Service",
    "StackFactory",
    "StackParts",
    "StackStartError",
    "StartsInOrder",
]
