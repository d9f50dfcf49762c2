"""The embedded dev stack behind ``arcflow dev``: start order, readiness, demo, clean shutdown.

Start order: a private temp dir, nats-server, the Kubernetes API emulator, the Actions
simulator, the pod runner (kubelet stand-in), then watcher, registrar and reconciler as
subprocesses (``python -m arcflow.<service>``), then the example ARS and the demo workload.
Every started part is pushed on one :class:`contextlib.AsyncExitStack`, so shutdown runs in
exact reverse order whatever failed, and the temp dir goes last.

A service that is not installed/importable is reported as such (view and summary) instead of
being waited for: the stack runs whatever exists. One that exits is restarted with back-off
(:mod:`arcflow.devstack.supervisor`, docs/adrs/0018-dev-stack-supervises-services.md).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nats.js.api import DeliverPolicy
from pydantic import SecretStr

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    ConflictError,
    KubeClient,
)
from arcflow.common.nats import stream_for_subject
from arcflow.common.nats.connection import NatsConnection
from arcflow.common.service.client import nats_client
from arcflow.common.service.ephemeral import EphemeralReader, StartAt, open_ephemeral
from arcflow.devstack import connection_file, demo
from arcflow.devstack.cluster_objects import ClusterObjects
from arcflow.devstack.demo import JobRecord, SummaryInputs, VariantTarget
from arcflow.devstack.example_teardown import ExampleTeardown
from arcflow.devstack.factory import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_NAMESPACE_ENV,
    StackFactory,
    StackParts,
    StackStartError,
)
from arcflow.devstack.live_view import (
    FEED_SUBJECTS,
    EventTail,
    Progress,
    ViewModel,
    build_view_model,
    busy_by_scale_set,
    desired_by_variant,
    footer_lines,
    scale_set_ids_from_events,
    variant_of,
)
from arcflow.devstack.node.stack import NodePods, NodeStack
from arcflow.devstack.node.stack import on_node as on_node_templates
from arcflow.devstack.pod_runner import PodRecord, PodRunner
from arcflow.devstack.supervisor import (
    DOWN_PREFIXES,
    ServiceProcess,
    Supervisor,
    module_available,
    service_env,
)

log = logging.getLogger(__name__)

SERVICES: tuple[str, ...] = ("watcher", "registrar", "reconciler")
#: The dev stack's own NATS connections (the live view's event feed) use ``_INBOX_devstack``:
#: never a service's inbox, never the shared ``_INBOX.``.
DEVSTACK_NATS_IDENTITY = "devstack"
#: Everything the demo needs to complete; the listener runs inside listener pods.
REQUIRED_FOR_DEMO: tuple[str, ...] = (*SERVICES, "listener")
_BLOCKED_GRACE_SECONDS = 30.0
#: Kubernetes backends: the in-process emulator, or a real control plane the stack starts.
KUBE_EMULATOR = "emulator"
KUBE_APISERVER = "apiserver"
KUBE_EXTERNAL = "external"
#: A real node (kubelet, containerd): arcflow installed with helm, every pod a container.
KUBE_NODE = "node"
KUBE_BACKENDS: tuple[str, ...] = (KUBE_EMULATOR, KUBE_APISERVER, KUBE_NODE)
#: The reconciler's controller namespace (listeners and their config Secrets live there). The
#: stack sets it explicitly and, on its own control plane, creates it: a fresh cluster has
#: only ``default`` and the system namespaces, and no arcflow component creates this one (a
#: deployment's installer does, as for any controller's own namespace).
_CONTROLLER_NAMESPACE_ENV = CONTROLLER_NAMESPACE_ENV

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_BLOCKED = 3


class StackError(RuntimeError):
    """The stack cannot start (bad options, a server that did not come up)."""


@dataclass
class StackOptions:
    jobs: int = 12
    job_duration: float = 1.0
    example: Path | None = None
    kubeconfig: str | None = None
    #: ``emulator`` (in process) or ``apiserver`` (etcd, kube-apiserver and
    #: kube-controller-manager of :mod:`arcflow.devstack.control_plane`); ignored with
    #: ``kubeconfig`` (an outside cluster).
    kube: str = KUBE_EMULATOR
    github_config_url: str | None = None
    github_token: str | None = None
    exit_when_done: bool = False
    timeout: float = 600.0
    keep_temp: bool = False
    poll_timeout: float = 5.0
    keep_demo: bool = False
    teardown_timeout: float = 30.0
    #: Where to write the connection details (``connection_file``); ``None``: nowhere.
    env_file: Path | None = None

    def __repr__(self) -> str:  # the token never shows
        return (
            f"StackOptions(jobs={self.jobs}, kube={self.kube!r}, kubeconfig={self.kubeconfig!r}, "
            f"github_config_url={self.github_config_url!r}, "
            f"exit_when_done={self.exit_when_done}, keep_demo={self.keep_demo})"
        )


@dataclass
class DevStack:
    """``async with DevStack(options) as stack: await stack.run(stop_event)``."""

    options: StackOptions
    on_update: Callable[[ViewModel], None] | None = None
    components: dict[str, str] = field(default_factory=dict)
    jobs: list[JobRecord] = field(default_factory=list)
    targets: list[VariantTarget] = field(default_factory=list)
    temp_dir: Path | None = None
    nats_url: str = ""
    parts: StackParts | None = None
    kube: KubeClient | None = None
    simulator: Any = None
    pod_runner: PodRunner | None = None
    #: ``--kube node``: the pods the node's kubelet runs (instead of a pod runner's records).
    node_pods: NodePods | None = None
    services: dict[str, ServiceProcess] = field(default_factory=dict)
    supervisors: dict[str, Supervisor] = field(default_factory=dict)
    tail: EventTail = field(default_factory=EventTail)
    #: What the stack sees of the cluster (counts, runner sets), from ``start`` on.
    objects: ClusterObjects | None = None
    ars: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    _exit: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _started_at: float = 0.0
    _kubeconfig: str | None = None
    #: ``emulator``, ``apiserver`` or ``external``, and the server's ``gitVersion``.
    kube_backend: str = ""
    kube_version: str = ""
    control_plane: Any = None
    #: What ``_apply_example`` created (kind -> the object as the server returned it); only
    #: these are removed again, never an object that existed before the stack started.
    _applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    _teardown_started: bool = False
    _scale_set_ids_seen: dict[str, int] = field(default_factory=dict)
    teardown_status: str = "not needed"
    left_behind: list[str] = field(default_factory=list)
    #: The connection file written at start, if any.
    env_file: Path | None = None
    #: ``start`` finished; ``stop`` (or the end of ``run``) begun; the run was cut short.
    _started: bool = False
    _stopping: bool = False
    interrupted: bool = False

    # --- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> DevStack:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._started_at = time.monotonic()
        # The view ticks while the stack starts (the services take seconds to import and
        # answer their health checks): the elapsed time moves, the screen never looks stuck.
        self._spawn(self._tick_until_started(), "view-ticker")
        example = self.options.example or demo.find_example()
        if example is None:
            raise StackError(f"cannot find {demo.EXAMPLE_RELATIVE_PATH}; pass --example PATH")
        raw_ars = demo.load_example_ars(example)
        org = _org_of(str((raw_ars.get("spec") or {}).get("githubConfigUrl") or ""))
        if self.options.github_config_url and not self.options.github_token:
            raise StackError("--github-config-url needs a token (--github-token or env)")
        if self.options.kubeconfig:
            self._set("pod runner", "disabled (a real cluster runs its own pods)")
        elif self.options.kube not in KUBE_BACKENDS:
            raise StackError(f"unknown Kubernetes backend {self.options.kube!r}")
        example_namespace = str((raw_ars.get("metadata") or {}).get("namespace") or "")
        temp = Path(tempfile.mkdtemp(prefix="arcflow-dev-"))
        self.temp_dir = temp
        if not self.options.keep_temp:
            self._exit.callback(shutil.rmtree, temp, True)
        outside = bool(self.options.kubeconfig)
        on_node = self.options.kube == KUBE_NODE and not outside
        node_stack: NodeStack | None = None
        factory: StackFactory | NodeStack
        if on_node:
            factory = node_stack = NodeStack(
                temp, poll_timeout=self.options.poll_timeout, on_status=self._set
            )
            self.node_pods = NodePods()
        else:
            factory = StackFactory(
                kube=self.options.kubeconfig or self.options.kube,
                simulator=not self.options.github_config_url,
                poll_timeout=self.options.poll_timeout,
                pod_runner=not outside,
                # On its own control plane the stack creates the reconciler's namespace and the
                # example's (a fresh cluster has neither); in an outside cluster the installer
                # made the controller's, and the example's is applied with the example.
                controller_namespace=None if outside else self.controller_namespace,
                namespaces=[example_namespace]
                if self.options.kube == KUBE_APISERVER and not outside
                else [],
                kube_qps=200,
                kube_burst=400,
                work_dir=temp,
                on_status=self._set,
                on_service_status=lambda changed: self._set(changed.name, changed.status),
            )
        try:
            parts = await self._exit.enter_async_context(factory)
        except StackStartError as exc:
            raise StackError(str(exc)) from None
        self.parts = parts
        self.nats_url = parts.nats_url
        self.kube_backend = parts.kube_backend
        self.control_plane = parts.control_plane
        self._kubeconfig = parts.kubeconfig
        self.kube = parts.kube
        self.simulator = parts.simulator
        self.pod_runner = parts.pod_runner
        self.kube_version = await _server_version(self._kubeconfig)

        if self.simulator is not None:
            config_url = self.simulator.config_url(org)
            token = self.simulator.add_pat()
        else:
            config_url = str(self.options.github_config_url)
            token = str(self.options.github_token)
            self._set("github", f"external ({config_url})")
        self._write_env_file(config_url, token)
        if outside and self.simulator is not None:
            self.notes.append("demo jobs not queued: no pod runner could run their runner pods")

        self.ars = demo.prepare_ars(raw_ars, github_config_url=config_url)
        if node_stack is not None:
            self.ars = on_node_templates(self.ars, node_stack.images["runner"])
            self.notes.append("runner pods run the runner image (the example's do not fit here)")
        self.targets = demo.variant_targets(self.ars)

        await self._start_feed()
        self.objects = ClusterObjects(parts.kube, self.node_pods, self._services_on_node)
        self._spawn(self.objects.follow(), "object-counter")

        for name, service in parts.services.items():
            self.services[name] = service.process
            self.supervisors[name] = service.supervisor
        if on_node:
            self._set("listener", "ready (the listener image, in listener pods)")
        elif module_available("arcflow.listener.__main__"):
            self._set("listener", "ready (runs in listener pods)")
        else:
            self._set("listener", "missing: arcflow.listener has no __main__")
        # Runs before the services stop (exit stacks unwind in reverse): the reconciler and
        # the registrar must still be there to finalize what the example made.
        self._exit.push_async_callback(self.teardown_demo)

        await self._apply_example(token)
        self._started = True
        self._notify()

    @property
    def controller_namespace(self) -> str:
        """The reconciler's controller namespace: the environment's, else ``arc-systems``."""
        return os.environ.get(_CONTROLLER_NAMESPACE_ENV) or CONTROLLER_NAMESPACE

    def _write_env_file(self, config_url: str, token: str) -> None:
        """The connection details for a shell and ``arcflow audit``; the PAT only when it is
        the simulator's (a real GitHub token never goes to a file)."""
        path = self.options.env_file
        if path is None or not self.nats_url:
            return
        values = {
            connection_file.NATS_URL: self.nats_url,
            connection_file.KUBECONFIG: self._kubeconfig or "",
        }
        if self.simulator is not None:
            values[connection_file.SIM_URL] = str(self.simulator.local_url)
            values[connection_file.GITHUB_CONFIG_URL] = config_url
            values[connection_file.SIM_PAT] = token
        try:
            connection_file.write(path, values)
        except OSError as exc:
            self.notes.append(f"cannot write the connection details to {path}: {exc}")
            return
        self.env_file = path
        self._exit.callback(connection_file.remove, path)

    async def start_unless(self, stop: asyncio.Event) -> bool:
        """:meth:`start`, abandoned as soon as ``stop`` is set (Ctrl-C while the services still
        import): False then, and the run counts as interrupted. The caller calls :meth:`stop`
        either way."""
        starting = asyncio.create_task(self.start(), name="devstack-start")
        stopping = asyncio.create_task(stop.wait(), name="devstack-start-stop")
        try:
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if starting.done() and not starting.cancelled():
            starting.result()  # a start that failed raises here
            return True
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        self.interrupted = True
        self._stopping = True
        self._notify_quietly()
        return False

    async def stop(self) -> None:
        """Stop everything in reverse start order; safe to call twice."""
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        exit_stack, self._exit = self._exit, contextlib.AsyncExitStack()
        await exit_stack.aclose()

    async def _tick_until_started(self) -> None:
        while not self._started:
            await asyncio.sleep(0.5)
            self._notify_quietly()

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    def _set(self, component: str, status: str) -> None:
        self.components[component] = status
        self._notify_quietly()  # progress shows while the stack starts, not only after

    # --- services ---------------------------------------------------------------------

    def restarts(self) -> dict[str, int]:
        """Restarts per supervised service (0 for one that never restarted)."""
        if self.node_pods is not None:
            return self.node_pods.restarts()
        return {name: service.restarts for name, service in self.services.items()}

    async def _stop_services(self) -> None:
        """Stop supervising and SIGTERM every service at once (reverse start order does not
        matter among peers), SIGKILL after a grace period."""
        supervisors = list(reversed(list(self.supervisors.values())))
        await asyncio.gather(*(s.stop() for s in supervisors))

    # --- the example ARS ----------------------------------------------------------------

    async def _apply_example(self, token: str) -> None:
        assert self.kube is not None
        meta = self.ars["metadata"]
        namespace = str(meta["namespace"])
        secret_name = str(self.ars["spec"]["githubConfigSecret"])
        documents: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name, "namespace": namespace},
                "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
            },
            self.ars,
        ]
        for document in documents:
            with contextlib.suppress(ConflictError):
                self._applied[str(document["kind"])] = await self.kube.create(document)
        self._set("example", f"applied ARS {namespace}/{meta['name']}")

    # --- tearing the example down again ---------------------------------------------------

    @property
    def owns_cluster(self) -> bool:
        """The embedded emulator or control plane dies with the stack, and all in it."""
        return not self.options.kubeconfig

    async def teardown_demo(self) -> None:
        """Remove what the stack applied to a cluster it does not own, while the services
        still run: delete the ARS, wait (``teardown_timeout``) for the reconciler to finalize
        it and its children and for the registrar to delete the scale sets, then delete the
        credentials Secret and (if the stack created it) the namespace. Whatever is still
        there at the deadline lands in ``left_behind`` and on stderr. Runs once."""
        if self._teardown_started:
            return
        self._teardown_started = True
        if (
            self.owns_cluster
            or self.kube is None
            or AUTOSCALING_RUNNER_SET.kind not in (self._applied)
        ):
            return
        if self.options.keep_demo:
            self.teardown_status = "skipped (--keep-demo)"
            self._set("example", "kept in the cluster (--keep-demo)")
            return
        self._set("example", "tearing down")
        self._notify_quietly()
        try:
            leftovers = await self._remove_example()
        except Exception as exc:  # the cluster went away, no permission, ...
            log.warning("teardown of the example failed: %s", exc)
            leftovers = [f"unknown (teardown failed: {type(exc).__name__}: {exc})"]
        self.left_behind = leftovers
        if leftovers:
            self.teardown_status = "incomplete"
            self._set("example", f"teardown incomplete: {len(leftovers)} left behind")
            log.warning("left behind in the cluster: %s", "; ".join(leftovers))
        else:
            self.teardown_status = "removed"
            self._set("example", "removed from the cluster")

    async def _remove_example(self) -> list[str]:
        assert self.kube is not None
        assert self.objects is not None
        return await ExampleTeardown(
            kube=self.kube,
            applied=self._applied,
            list_all=self.objects.list_all,
            scale_sets_left=self._scale_sets_left,
            stop_services=self._stop_services,
            timeout=self.options.teardown_timeout,
        ).run()

    def _scale_sets_left(self) -> list[str]:
        """Scale sets of the example the registrar has not deleted (simulator mode only;
        real GitHub is not asked)."""
        if self.simulator is None:
            return []
        names = {t.scale_set_name for t in self.targets}
        return sorted(
            f"scale set {s['name']} (id {s['id']}, simulator)"
            for s in self.simulator.snapshot()["scaleSets"]
            if s["name"] in names
        )

    def _services_on_node(self) -> None:
        """On the node: the services' pods' state, after each pod event."""
        if self.node_pods is None:
            return
        for name in SERVICES:
            status = self.node_pods.service_status(name)
            if self.components.get(name) != status:
                self._set(name, status)

    def _notify_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self._notify()

    # --- event feed and object counts -------------------------------------------------

    async def _start_feed(self) -> None:
        """The live view's event feed: core subscriptions on the dev nats-server (no users);
        on a server that checks identities, ephemeral consumers on the event streams as the
        read-only identity the stack got (``arcflow audit``'s way)."""
        parts = self.parts
        if parts is not None and parts.nats_user:
            settings = NatsConnection(
                url=self.nats_url,
                name="arcflow-dev-view",
                user=parts.nats_user,
                password=SecretStr(parts.nats_password or ""),
            )
            client = await self._exit.enter_async_context(nats_client(settings, "auditor"))
            for subject in FEED_SUBJECTS:
                stream = stream_for_subject(subject).name
                reader = await open_ephemeral(client, stream, subject, StartAt(DeliverPolicy.NEW))
                self._spawn(self._pump_feed(reader), f"feed-{stream}")
            return
        settings = NatsConnection(url=self.nats_url, name="arcflow-dev-view")
        client = await self._exit.enter_async_context(nats_client(settings, DEVSTACK_NATS_IDENTITY))

        async def on_message(msg: Any) -> None:
            self.tail.add(msg.subject, msg.data)

        for subject in FEED_SUBJECTS:
            await client.subscribe(subject, cb=on_message)

    async def _pump_feed(self, reader: EphemeralReader) -> None:
        # Until the stack stops, not only until cancelled: on Python 3.11 ``asyncio.wait_for``
        # (inside nats-py's ``next_msg``) swallows a cancellation that arrives as a message
        # does, and a ``while True`` loop would then never end (seen: a stop that hung).
        while not self._stopping:
            for msg in await reader.take(timeout=1.0):
                if msg.subject.startswith("arc."):  # not a heartbeat or a flow-control request
                    self.tail.add(msg.subject, msg.data)

    # --- demo ---------------------------------------------------------------------------

    @property
    def pod_records(self) -> list[PodRecord]:
        """The listener and runner pods: as the pod runner played them, or as the node's
        kubelet ran them; none when neither runs pods."""
        if self.pod_runner is not None:
            return list(self.pod_runner.records.values())
        if self.node_pods is not None:
            return list(self.node_pods.records.values())
        return []

    @property
    def runs_pods(self) -> bool:
        return self.pod_runner is not None or self.node_pods is not None

    @property
    def variants(self) -> list[str]:
        return [t.variant for t in self.targets]

    @property
    def ars_name(self) -> str:
        return str(self.ars.get("metadata", {}).get("name", ""))

    def blocked_by(self) -> list[str]:
        """Required parts that are missing or died: the demo cannot complete without them.
        Nothing is known to be blocked before the stack finished starting."""
        if not self._started:
            return []
        blocked = [
            name
            for name in REQUIRED_FOR_DEMO
            if self.components.get(name, "").startswith(DOWN_PREFIXES)
        ]
        if not self.runs_pods:
            blocked.append("pod runner")
        if self.simulator is None:
            blocked.append("simulator (demo jobs need it)")
        return blocked

    def scale_set_ids(self) -> dict[str, int]:
        ids = scale_set_ids_from_events(self.tail.assignments, self.ars_name)
        if self.simulator is not None:
            by_name = {s["name"]: int(s["id"]) for s in self.simulator.snapshot()["scaleSets"]}
            for target in self.targets:
                if target.scale_set_name in by_name:
                    ids.setdefault(target.variant, by_name[target.scale_set_name])
        # Remembered: the teardown deletes the scale sets, the summary still names their ids.
        self._scale_set_ids_seen.update(ids)
        return dict(self._scale_set_ids_seen)

    def enqueue_demo(self) -> None:
        if self.simulator is None:
            return
        plan = demo.plan_demo_jobs(
            self.targets, self.options.jobs, base_duration=self.options.job_duration
        )
        for job in plan:
            job_id = self.simulator.enqueue_job(
                job.labels, duration=job.duration, display_name=f"demo {job.variant}"
            )
            self.jobs.append(JobRecord(job_id=job_id, variant=job.variant, queued_at=time.time()))

    def refresh_jobs(self) -> None:
        if self.simulator is None:
            return
        pods_by_job: dict[str, float] = {}
        pods_by_name: dict[str, float] = {}
        for record in self.pod_records:
            if record.job_id is not None:
                pods_by_job[record.job_id] = record.seen_at
            if record.kind == "runner":
                pods_by_name[record.name] = record.seen_at
        for job in self.jobs:
            sim_job = self.simulator.engine.job(job.job_id)
            job.state = sim_job.state.value
            job.result = sim_job.final_result
            if sim_job.runner_assign_time is not None:
                job.started_at = sim_job.runner_assign_time.timestamp()
            if sim_job.finish_time is not None and job.state == "completed":
                job.finished_at = sim_job.finish_time.timestamp()
            if job.job_id in pods_by_job:
                job.runner_pod_created_at = pods_by_job[job.job_id]
            elif sim_job.runner_name in pods_by_name:  # a real runner: its pod has its name
                job.runner_pod_created_at = pods_by_name[sim_job.runner_name]

    def _other_jobs(self) -> list[JobRecord]:
        if self.simulator is None:
            return []
        return demo.other_jobs(self.simulator.jobs(), (j.job_id for j in self.jobs), self.targets)

    def pods_created(self) -> dict[str, int]:
        counts = {"listener": 0, "runner": 0}
        for record in self.pod_records:
            counts[record.kind] += 1
        return counts

    def progress(self) -> Progress:
        ids = self.scale_set_ids()
        counts = demo.counts_by_variant(self.jobs, self.variants)
        started = self._started
        return Progress(
            started=started,
            stopping=self._stopping,
            interrupted=self.interrupted,
            variants=len(self.targets),
            registered=sum(1 for t in self.targets if t.variant in ids),
            requested=self.options.jobs,
            queued=len(self.jobs),
            done=sum(c.done for c in counts.values()),
            failed=sum(c.failed for c in counts.values()),
            blocked=tuple(self.blocked_by()) if started else (),
            components_up=sum(
                1 for v in self.components.values() if v.startswith(("running", "ready"))
            ),
            components=max(len(self.components), 8),
        )

    def footer(self) -> list[str]:
        if self._stopping:  # the details are going away with the stack
            return []
        sim_url = str(self.simulator.local_url) if self.simulator is not None else None
        label = self.targets[-1].scale_set_name if self.targets else None
        return footer_lines(
            env_file=str(self.env_file) if self.env_file else None,
            nats_url=self.nats_url or None,
            kubeconfig=self._kubeconfig,
            sim_url=sim_url if self.runs_pods else None,
            job_label=label,
        )

    def view_model(self) -> ViewModel:
        objects = self.objects
        current: dict[str, int] = {}
        notes = list(self.notes)
        for record in self.pod_records:
            if record.kind == "runner" and record.active:
                variant = variant_of(record.name, record.labels, self.ars_name, self.variants)
                if variant is not None:
                    current[variant] = current.get(variant, 0) + 1
            if record.kind == "listener" and record.exit_code not in (None, 0):
                notes.append(f"listener pod {record.name} exited {record.exit_code}")
        namespace = self.ars.get("metadata", {}).get("namespace")
        return build_view_model(
            title=f"arcflow dev {namespace}/{self.ars_name}" if self.ars else "arcflow dev",
            variants=self.variants,
            scale_set_ids=self.scale_set_ids(),
            desired=desired_by_variant(
                list(objects.ers.values()) if objects else [], self.ars_name, self.variants
            ),
            current=current,
            busy=busy_by_scale_set(self.simulator.snapshot() if self.simulator else None),
            jobs=demo.counts_by_variant(self.jobs + self._other_jobs(), self.variants),
            components=self.components,
            events=list(self.tail.lines),
            notes=notes,
            scale_set_names={t.variant: t.scale_set_name for t in self.targets},
            progress=self.progress(),
            elapsed=time.monotonic() - self._started_at if self._started_at else 0.0,
            footer=self.footer(),
            sets=list(objects.runner_sets.values()) if objects else [],
        )

    def _notify(self) -> None:
        if self.on_update is not None:
            self.on_update(self.view_model())

    def summary(self, *, timed_out: bool = False) -> dict[str, Any]:
        self.refresh_jobs()
        summary = demo.build_summary(
            SummaryInputs(
                jobs=self.jobs,
                variants=self.variants,
                scale_set_ids=self.scale_set_ids(),
                pods_created=self.pods_created(),
                objects_created=dict(self.objects.created) if self.objects else {},
                components=dict(self.components),
                blocked_by=self.blocked_by(),
                duration_seconds=time.monotonic() - self._started_at,
                timed_out=timed_out,
                requested_jobs=self.options.jobs,
                teardown=self.teardown_status,
                left_behind=list(self.left_behind),
                notes=list(self.notes),
                restarts=self.restarts(),
                interrupted=self.interrupted,
            )
        )
        summary["kube"] = {"backend": self.kube_backend, "version": self.kube_version}
        return summary

    async def run(self, stop: asyncio.Event) -> tuple[int, dict[str, Any]]:
        """Wait for scale sets, enqueue the demo, refresh until ``stop`` (or done/blocked when
        ``exit_when_done``), then tear the example down (:meth:`teardown_demo`). Returns the
        exit code and the summary, which says what the teardown left behind."""
        code, timed_out = await self._run_demo(stop)
        self._stopping = True
        self.interrupted = stop.is_set() and not demo.all_jobs_done(self.jobs)
        self._notify_quietly()
        await self.teardown_demo()
        self._notify_quietly()
        return code, self.summary(timed_out=timed_out)

    async def _run_demo(self, stop: asyncio.Event) -> tuple[int, bool]:
        options = self.options
        deadline = time.monotonic() + options.timeout
        blocked_since: float | None = None
        enqueued = False
        while not stop.is_set():
            now = time.monotonic()
            ids = self.scale_set_ids()
            all_registered = bool(self.targets) and all(t.variant in ids for t in self.targets)
            runnable = self.simulator is not None and self.runs_pods
            if not enqueued and all_registered and runnable:
                self.enqueue_demo()
                enqueued = True
            self.refresh_jobs()
            self._notify()
            if options.exit_when_done:
                if enqueued and demo.all_jobs_done(self.jobs):
                    return EXIT_DONE, False
                if self.blocked_by():
                    blocked_since = blocked_since or now
                    if all_registered or now - blocked_since > _BLOCKED_GRACE_SECONDS:
                        return EXIT_BLOCKED, False
                if now > deadline:
                    return EXIT_FAILED, True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
        return (EXIT_DONE if demo.all_jobs_done(self.jobs) else EXIT_FAILED), False


async def _server_version(kubeconfig: str | None) -> str:
    """The server's ``gitVersion`` (``/version``), or "" when it does not say."""
    if not kubeconfig:
        return ""
    from arcflow.devstack.kubelet import ApiCaller

    try:
        api = ApiCaller.from_kubeconfig(kubeconfig)
    except Exception:  # e.g. an exec-plugin kubeconfig the light reader refuses
        return ""
    try:
        return str((await api.request("GET", "/version")).get("gitVersion") or "")
    except Exception:  # the version is informative only
        return ""
    finally:
        await api.close()


def _org_of(config_url: str) -> str:
    """The org (or owner) of a github.com config URL, for the simulator's URL."""
    parts = [p for p in config_url.split("://", 1)[-1].split("/")[1:] if p]
    return parts[0] if parts else "example-org"


__all__ = [
    "EXIT_BLOCKED",
    "EXIT_DONE",
    "EXIT_FAILED",
    "KUBE_APISERVER",
    "KUBE_BACKENDS",
    "KUBE_EMULATOR",
    "KUBE_EXTERNAL",
    "KUBE_NODE",
    "REQUIRED_FOR_DEMO",
    "SERVICES",
    "DevStack",
    "ServiceProcess",
    "StackError",
    "StackOptions",
    "module_available",
    "service_env",
]
