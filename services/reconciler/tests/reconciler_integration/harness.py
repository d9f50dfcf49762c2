"""A real nats-server, the Kubernetes emulator and one reconciler, wired for tests.

The registrar is stood in for by (a) KV records written the way it writes them and (b) a tiny
RPC responder on the registrar subjects that hands out fake JIT configs and records calls. It
is the reconciler's boundary here: what the reconciler asked of the registrar is the
responder's call log (the tests of the real registrar and the Actions simulator, which check
removal on the simulator, are ``test_end_to_end.py`` and ``test_slots.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from opentelemetry.metrics import Meter

from arcflow.common import subjects
from arcflow.common.events import EventKeys, ObjectWritten, ScaleSetAssigned, parse_event
from arcflow.common.kube import ConflictError, ForbiddenError, KubeClient, NotFoundError
from arcflow.common.nats import KV_SCALESETS, NatsSettings, ensure_jetstream, publish_event
from arcflow.common.scaleset_records import record_key
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.controllers.runner_removals import RunnerRemovals
from arcflow.reconciler.keys import Key
from arcflow.reconciler.service import SERVICE
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.reconciler.state import ReconcilerState
from tests.manifests import pat_secret
from tests.metrics import metric_total as metric_total
from tests.polling import eventually

CONTROLLER_NS = "arc-systems"
SECRET_NAME = "github-creds"
TOKEN = "ghp_supersecrettoken123"
JIT_PREFIX = "jit-secret-config-"


def runner_template(image: str) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [{"name": "runner", "image": image, "command": ["/home/runner/run.sh"]}]
        }
    }


def ars_manifest(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/acme",
        "githubConfigSecret": SECRET_NAME,
        "template": runner_template("ghcr.io/actions/actions-runner:latest"),
    }
    body.update(spec)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


@dataclass
class FakeRegistrarRpc:
    """Answers the registrar RPC subjects; runner ids count up from 1000."""

    nc: NatsClient
    next_id: int = 1000
    jit_requests: list[dict[str, Any]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    #: Every remove-runner request, whatever it was answered (``removed``: those answered ok).
    remove_requests: list[int] = field(default_factory=list)
    jit_unavailable: bool = False  # answer jitconfig with an upstream error
    busy_runner_ids: set[int] = field(default_factory=set)  # remove-runner: job_still_running
    # jitconfig answers runner_exists while the name is registered here (name -> info)
    registered: dict[str, dict[str, Any]] = field(default_factory=dict)
    # When set, jitconfig answers only once the gate opens (a slow registrar); held counts them.
    jit_gate: asyncio.Event | None = None
    jit_held: int = 0

    async def start(self) -> None:
        await self.nc.subscribe(subjects.RPC_REGISTRAR_JITCONFIG, cb=self._jit)
        await self.nc.subscribe(subjects.RPC_REGISTRAR_REMOVE_RUNNER, cb=self._remove)
        await self.nc.subscribe(subjects.RPC_REGISTRAR_GET_RUNNER, cb=self._get)

    async def _jit(self, msg: Msg) -> None:
        request = json.loads(msg.data)
        if self.jit_gate is not None:
            self.jit_held += 1
            await self.jit_gate.wait()
        if self.jit_unavailable:
            error = {"code": "upstream_error", "reason": "service unavailable (test)"}
            await msg.respond(json.dumps({"ok": False, "error": error}).encode())
            return
        if request["runner_name"] in self.registered:
            error = {"code": "runner_exists", "reason": "A runner with the name exists (test)"}
            await msg.respond(json.dumps({"ok": False, "error": error}).encode())
            return
        self.jit_requests.append(request)
        self.next_id += 1
        result = {
            "runner_id": self.next_id,
            "runner_name": request["runner_name"],
            "scale_set_id": request["scale_set_id"],
            "encoded_jit_config": f"{JIT_PREFIX}{self.next_id}",
        }
        await msg.respond(json.dumps({"ok": True, "result": result}).encode())

    async def _remove(self, msg: Msg) -> None:
        runner_id = json.loads(msg.data)["runner_id"]
        self.remove_requests.append(runner_id)
        if runner_id in self.busy_runner_ids:
            outcome = "job_still_running"
        else:
            outcome = "ok"
            self.removed.append(runner_id)
            for name, info in list(self.registered.items()):
                if info["id"] == runner_id:
                    del self.registered[name]
        await msg.respond(json.dumps({"ok": True, "result": {"outcome": outcome}}).encode())

    async def _get(self, msg: Msg) -> None:
        runner = self.registered.get(json.loads(msg.data)["runner_name"])
        await msg.respond(json.dumps({"ok": True, "result": {"runner": runner}}).encode())


@dataclass
class TestClock:
    """The reconciler's wall clock in a test (its Context's ``clock``, fixed when the
    reconciler is built): real time shifted by ``offset``, or ``frozen`` at one instant."""

    __test__ = False  # not a test class

    offset: timedelta = timedelta(0)
    frozen: datetime | None = None

    def __call__(self) -> datetime:
        return self.frozen if self.frozen is not None else datetime.now(UTC) + self.offset


@dataclass
class Stack:
    nc: NatsClient
    kube: KubeClient
    namespace: str
    app: ReconcilerState
    rpc: FakeRegistrarRpc
    apps: list[ReconcilerState] = field(default_factory=list)
    #: Where listeners and their config Secrets go (the reconciler's controller_namespace).
    controller_namespace: str = CONTROLLER_NS
    #: Every replica's wall clock: a test moves time by changing it.
    clock: TestClock = field(default_factory=TestClock)
    #: The replicas' service runtimes (a test may stop one as SIGTERM would).
    runtimes: list[ServiceRuntime] = field(default_factory=list)

    async def wait_idle(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        for app in self.apps or [self.app]:
            await app.queue.wait_idle(timeout)

    async def handled(
        self,
        kind: str,
        name: str,
        seen: Callable[[dict[str, Any] | None], bool],
        *,
        within: float = 10.0,
    ) -> None:
        """Wait until the reconciler handled a change of ``kind/name`` in the stack's
        namespace: every replica's cache holds it (``seen`` says so of the cached object, or of
        ``None`` once it is gone), then that object's pass after it has ended, with the removal
        calls it handed in (ADR 0101). A check that nothing happened looks only after this (a
        fixed wait passes whether or not the pass ran). The cache queues the key as it stores
        the change (``cache.py``), so a key neither queued, in flight nor due again after that
        moment has had its pass; its look again later (a timer) is not waited for."""
        controller = next(c for c in DECLARED.controllers if c.resource.kind == kind)
        key = Key(controller.kind, self.namespace, name)

        async def done() -> bool:
            for app in self.apps or [self.app]:
                cached = app.cache.get(kind, name, self.namespace)
                assert seen(cached), f"{kind} {name} as cached: {cached}"
                assert not app.queue.is_busy(key), f"{key}: queued or in flight"
                removals = app.context.state(RunnerRemovals).pending
                assert not removals, f"removal calls in flight: {removals}"
            return True

        await eventually(done, within=within, what=f"the reconciler's pass over {kind} {name}")

    async def set_pod_status(
        self, name: str, status: dict[str, Any], namespace: str | None = None
    ) -> None:
        """Play the kubelet: write a pod's status (the reconciler's watch sees it). Like a
        kubelet, wait for the pod to exist first (it follows its runner's registration
        within the same reconcile, but a test can look in between)."""
        ns = namespace or self.namespace

        async def exists() -> bool:
            try:
                await self.kube.get("Pod", name, ns)
            except NotFoundError:
                return False
            return True

        await eventually(exists, what=f"pod {ns}/{name}")
        await self.kube.patch_status("Pod", name, status, namespace=ns)

    async def set_runner_status(self, name: str, status: dict[str, Any]) -> None:
        """Play the listener: write an EphemeralRunner's status (e.g. a job id)."""
        await self.kube.patch_status("EphemeralRunner", name, status, namespace=self.namespace)

    async def events(self, reason: str, name: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in await self.list("Event")
            if e.get("reason") == reason and (name is None or e["involvedObject"]["name"] == name)
        ]

    async def scale(self, ers: str, replicas: int, patch_id: int) -> None:
        await self.kube.patch_merge(
            "EphemeralRunnerSet",
            ers,
            {"spec": {"replicas": replicas or None, "patchID": patch_id}},
            namespace=self.namespace,
        )

    async def all_events(self) -> list[Any]:
        """Every event on the audit subjects (object.written and runner.lifecycle)."""
        sub = await self.js.subscribe("arc.audit.>", ordered_consumer=True)
        found: list[Any] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.3)
                except nats.errors.TimeoutError:
                    break
                found.append(parse_event(msg.data))
        finally:
            await sub.unsubscribe()
        return found

    @property
    def js(self) -> Any:
        return self.nc.jetstream()

    async def register(self, ars: str, variant: str, scale_set_id: int) -> None:
        """Write the KV record the registrar writes after registering a variant."""
        value = await self.put_record(ars, variant, scale_set_id)
        await self._records_seen(ars, variant, value)

    async def put_record(self, ars: str, variant: str, scale_set_id: int) -> bytes:
        """Only the KV write of :meth:`register`, not waiting for the records watch; returns
        the value written."""
        kv = await self.js.key_value(KV_SCALESETS.bucket)
        record = {
            "namespace": self.namespace,
            "ars": ars,
            "variant": variant,
            "scale_set_id": scale_set_id,
            "scale_set_name": f"{ars}-{variant}" if variant else ars,
            "runner_group_id": 1,
            "runner_group_name": "Default",
            "github_config_url": "https://github.com/acme",
            "github_config_secret": SECRET_NAME,
        }
        value = json.dumps(record).encode()
        await kv.put(record_key(self.namespace, ars, variant), value)
        return value

    async def announce(self, ars: str, scale_set_id: int) -> None:
        """Publish the registrar's ``scaleset.assigned`` of a single-shape ARS (after its
        record, as the registrar does)."""
        assigned = ScaleSetAssigned(
            source="test-registrar",
            keys=EventKeys(namespace=self.namespace, ars=ars, scale_set_id=scale_set_id),
            scale_set_id=scale_set_id,
            scale_set_name=ars,
            runner_group_id=1,
            runner_group_name="Default",
        )
        await publish_event(self.js, subjects.scalesets_subject(self.namespace, ars), assigned)

    async def unregister(self, ars: str, variant: str) -> None:
        """Delete the KV record, as the registrar does once it deleted the scale set."""
        kv = await self.js.key_value(KV_SCALESETS.bucket)
        await kv.delete(record_key(self.namespace, ars, variant))
        await self._records_seen(ars, variant, None)

    async def _records_seen(self, ars: str, variant: str, value: bytes | None) -> None:
        """Until every replica's next ARS pass reads ``value``: the registrar publishes an event
        after its write, which sends the pass to the bucket (ADR 0122); this write has none, so
        wait for the records watch to deliver it."""

        async def seen() -> bool:
            for app in self.apps or [self.app]:
                assert app.ids is None or app.ids.caught_up(self.namespace, ars, variant, value)
            return True

        await eventually(seen, within=10, what=f"the records watch delivering {ars}/{variant}")

    async def apply_ars(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        for attempt in range(5):
            try:
                current = await self.kube.get("AutoscalingRunnerSet", name, self.namespace)
            except Exception:
                await self.kube.create(manifest)
                break
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {**dict.fromkeys(current["spec"]), **manifest["spec"]},
            }
            try:
                await self.kube.patch_merge(
                    "AutoscalingRunnerSet", name, patch, namespace=self.namespace
                )
                break
            except ConflictError:
                # The reconciler wrote the ARS (its status) between our read and our write:
                # read again, as kubectl apply would.
                if attempt == 4:
                    raise

    async def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return (await self.kube.list(kind, namespace=namespace or self.namespace)).items

    async def audit_events(self) -> builtins.list[ObjectWritten]:
        js = self.js
        sub = await js.subscribe("arc.audit.>", ordered_consumer=True)
        events: builtins.list[ObjectWritten] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.3)
                except nats.errors.TimeoutError:
                    break
                event = parse_event(msg.data)
                if isinstance(event, ObjectWritten):
                    events.append(event)
        finally:
            await sub.unsubscribe()
        return events


def reconciler_test_settings(**overrides: Any) -> ReconcilerSettings:
    values: dict[str, Any] = {
        "controller_namespace": CONTROLLER_NS,
        "listener_image": "ghcr.io/arcflow/listener:test",
        "listener_image_pull_secrets": ["regcred"],
        "workers": 4,
        "retry_base_seconds": 0.05,
        "retry_cap_seconds": 0.5,
        "resync_interval_seconds": 3600,
        "fetch_timeout_seconds": 0.2,
        "rpc_timeout_seconds": 2,
        "outdated_backoff_base_seconds": 2.0,
        "outdated_backoff_cap_seconds": 10.0,
        # Registration and phase written at once (the tests read runnerId before any pod
        # runs); test_status_writes.py covers the production delay.
        "pending_status_delay_seconds": 0.0,
        "status_interval_seconds": 1.0,  # counts seen sooner than in production (5 s)
    }
    values.update(overrides)
    return ReconcilerSettings(**values)


async def ensure_namespace(kube: KubeClient, name: str) -> None:
    """Create the controller namespace as the reconciler's chart does (a real server never
    makes one up; the emulator does on first use). Shared by the tests of a session. A
    least-privilege identity may not create it (403): its test creates it as the admin."""
    with suppress(ConflictError, ForbiddenError):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@asynccontextmanager
async def build_stack(
    nats_url: str,
    kube: KubeClient,
    namespace: str,
    *,
    replicas: int = 1,
    settings: ReconcilerSettings | None = None,
    meter: Meter | None = None,
    controller_namespace: str | None = None,
    ensure: bool = True,
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """One reconciler (or ``replicas``) on ``kube``; listeners go to ``controller_namespace``,
    by default ``<namespace>-systems``, created here as the chart's release namespace would be
    (on the shared real server, a test of its own sees no other test's listeners).
    ``ensure=False``: the controller namespace is not created (as no chart did)."""
    controller_namespace = controller_namespace or f"{namespace}-systems"
    if ensure:
        await ensure_namespace(kube, controller_namespace)
    # Only this test's namespace (and its controller namespace): the real API server is shared
    # by the session, and a cluster-wide reconciler would also clean up other tests' leftovers.
    settings = (settings or reconciler_test_settings()).model_copy(
        update={"controller_namespace": controller_namespace, "namespaces": [namespace]}
    )
    nc = await nats.connect(nats_url)
    await ensure_jetstream(nc.jetstream())
    await kube.create(pat_secret(SECRET_NAME, namespace, TOKEN))
    rpc = FakeRegistrarRpc(nc)
    await rpc.start()
    clock = TestClock()
    overrides["context"] = {"clock": clock, **overrides.get("context", {})}
    runtimes = [
        reconciler_runtime(
            nats_url,
            kube,
            settings,
            meter=meter,
            **overrides,
        )
        for _ in range(replicas)
    ]
    try:
        for runtime in runtimes:
            await runtime.start()
        apps = [runtime.state for runtime in runtimes]
        yield Stack(nc, kube, namespace, apps[0], rpc, apps, controller_namespace, clock, runtimes)
    finally:
        for runtime in runtimes:
            await runtime.stop()
        await nc.drain()


def reconciler_runtime(
    nats_url: str,
    kube: KubeClient,
    settings: ReconcilerSettings,
    *,
    serve_health: bool = False,
    meter: Meter | None = None,
    **overrides: Any,
) -> ServiceRuntime:
    """One reconciler replica through the service runtime, with fast test timings
    (``overrides["context"]``: values for the controllers' Context fields)."""
    overrides["context"] = {"job_running_recheck": 0.2, **overrides.get("context", {})}
    return ServiceRuntime(
        SERVICE,
        settings,
        nats_settings=NatsSettings(url=nats_url),
        kube=kube,
        overrides=overrides,
        serve_health=serve_health,
        serve_metrics=False,
        meter=meter,
    )


async def simulator_requests(sim: ActionsSimulator, route: str, method: str) -> int:
    """Requests whose path matches ``route`` (a glob) the Actions simulator received, read
    through its HTTP control API (its own request log, not a fake's call log)."""
    async with httpx.AsyncClient(base_url=sim.base_url) as http:
        answer = await http.get("/_sim/requests", params={"route": route, "method": method})
    answer.raise_for_status()
    return len(answer.json()["requests"])


async def removal_calls(sim: ActionsSimulator, runner_id: int) -> int:
    """DELETEs of this runner the Actions simulator received."""
    return await simulator_requests(sim, f"*/agents/{runner_id}", "DELETE")
