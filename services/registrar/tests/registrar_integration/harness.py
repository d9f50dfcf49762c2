"""Shared pieces of the registrar's end-to-end tests: a real nats-server, the Kubernetes
emulator, the Actions simulator and one or two registrar replicas wired to them."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError as JsNotFoundError
from opentelemetry.metrics import Meter

from arcflow.common import subjects
from arcflow.common.actions import ActionsClient, RetryPolicy
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.events import K8sChange, K8sObjectChanged, encode_event, parse_event
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, KubeClient
from arcflow.common.nats import STREAMS, NatsSettings
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.registrar.credentials import Credentials
from arcflow.registrar.service import SERVICE
from arcflow.registrar.settings import RegistrarSettings
from arcflow.registrar.state import RegistrarState

SECRET_NAME = "github-creds"


def test_settings(instance: str) -> RegistrarSettings:
    return RegistrarSettings(
        instance=instance,
        health_host="127.0.0.1",
        health_port=0,
        fetch_timeout_seconds=0.2,
        retry_delay_seconds=0.1,
        retry_delay_cap_seconds=0.5,
        resync_interval_seconds=0.5,
        lock_wait_seconds=2.0,
        lock_ttl_seconds=10.0,
    )


def fast_client_factory(
    config_url: str, credentials: Credentials, connection: ServerConnection | None = None
) -> ActionsClient:
    return ActionsClient(config_url, credentials, retry=RetryPolicy.fast(), connection=connection)


class LogCapture(logging.Handler):
    """Every log record of the run, formatted with its extras (what a log shipper would see)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS}
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name} {record.levelname} {text} {extras}")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_STANDARD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message"}


@dataclass
class Stack:
    nats_url: str
    nc: NatsClient
    js: JetStreamContext
    kube: KubeClient
    namespace: str
    sim: ActionsSimulator
    pat: str
    apps: list[ServiceRuntime] = field(default_factory=list)
    extra_connections: list[NatsClient] = field(default_factory=list)

    @property
    def config_url(self) -> str:
        return self.sim.config_url("my-org")

    async def start_registrar(
        self,
        instance: str = "r1",
        *,
        run_sweep: bool = True,
        meter: Meter | None = None,
        tracer_provider: Any = None,
        **settings: Any,
    ) -> ServiceRuntime:
        """One registrar replica through the service runtime (its own NATS connection)."""
        app = ServiceRuntime(
            SERVICE,
            # Only this test's namespace: the real API server is shared by the session, and
            # a cluster-wide registrar would sweep other tests' sets too.
            test_settings(instance).model_copy(update={"namespaces": [self.namespace], **settings}),
            nats_settings=NatsSettings(url=self.nats_url),
            kube=self.kube,
            meter=meter,
            overrides={"client_factory": fast_client_factory, "tracer_provider": tracer_provider},
            serve_metrics=False,
            run_periodic=run_sweep,
        )
        await app.start()
        self.apps.append(app)
        return app

    async def create_secret(self, data: dict[str, str], name: str = SECRET_NAME) -> None:
        await self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": self.namespace},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            }
        )

    def ars_manifest(
        self, name: str, variants: list[dict[str, Any]] | None = None, **spec: Any
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "githubConfigUrl": self.config_url,
            "githubConfigSecret": SECRET_NAME,
            "template": {"spec": {"containers": [{"name": "runner", "image": "runner:latest"}]}},
        }
        if variants is not None:
            body["runnerVariants"] = variants
        body.update(spec)
        return {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "finalizers": ["autoscalingrunnerset.actions.github.com/finalizer"],
            },
            "spec": body,
        }

    async def get_ars(self, name: str) -> dict[str, Any]:
        return await self.kube.get(AUTOSCALING_RUNNER_SET, name, self.namespace)

    async def publish_change(self, obj: dict[str, Any], change: K8sChange = "MODIFIED") -> None:
        """What the watcher publishes for a change (level trigger: only metadata)."""
        await self.publish_raw(change_event(obj, change), dedup=True)

    async def publish_raw(self, event: K8sObjectChanged, *, dedup: bool) -> None:
        subject = subjects.k8s_subject(event.resource, event.namespace, event.name)
        headers = {"Nats-Msg-Id": f"{event.uid}:{event.resource_version}:{event.change}"}
        await self.js.publish(
            subject, encode_event(event), stream="ARC_K8S", headers=headers if dedup else None
        )

    def scale_sets(self) -> dict[str, dict[str, Any]]:
        return {s["name"]: s for s in self.sim.snapshot()["scaleSets"]}

    def create_requests(self) -> int:
        return len(self.sim.requests_matching("*/_apis/runtime/runnerscalesets", method="POST"))

    async def records(self, ars: str) -> dict[str, ScaleSetRecord]:
        return await state_of(self.apps[0]).context.records.by_variant(self.namespace, ars)

    async def stream_events(self, stream: str) -> list[tuple[str, Any]]:
        return [
            (subject, parse_event(data)) for subject, data in await stream_messages(self.js, stream)
        ]

    async def aclose(self) -> None:
        for app in self.apps:
            await app.stop()
        for nc in self.extra_connections:
            with contextlib.suppress(Exception):
                await nc.drain()
        await self.nc.drain()


def state_of(app: ServiceRuntime) -> RegistrarState:
    """The registrar state of a running replica."""
    state = app.state
    assert isinstance(state, RegistrarState)
    return state


def change_event(obj: dict[str, Any], change: K8sChange) -> K8sObjectChanged:
    meta = obj["metadata"]
    plural = {
        "AutoscalingRunnerSet": "autoscalingrunnersets",
        "EphemeralRunnerSet": "ephemeralrunnersets",
    }[obj["kind"]]
    return K8sObjectChanged(
        source="test-watcher",
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        resource=plural,
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta.get("uid", "uid-unknown"),
        change=change,
        resource_version=str(meta.get("resourceVersion", "0")),
        generation=meta.get("generation"),
        labels=meta.get("labels") or {},
        deletion_timestamp=meta.get("deletionTimestamp"),
    )


async def stream_messages(js: JetStreamContext, stream: str) -> list[tuple[str, bytes]]:
    """Every message stored in a stream (subject, payload)."""
    info = await js.stream_info(stream)
    out: list[tuple[str, bytes]] = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages == 0:
            break
        try:
            msg = await js.get_msg(stream, seq)
        except JsNotFoundError:
            continue
        out.append((msg.subject or "", msg.data or b""))
    return out


async def all_stored_messages(js: JetStreamContext) -> list[tuple[str, str, bytes]]:
    """(stream, subject, payload) of every arcflow stream and KV bucket stream."""
    names = [s.name for s in STREAMS] + ["KV_arcflow_scalesets", "KV_arcflow_registrar_locks"]
    found: list[tuple[str, str, bytes]] = []
    for name in names:
        with contextlib.suppress(JsNotFoundError):
            found += [(name, subject, data) for subject, data in await stream_messages(js, name)]
    return found


@contextlib.asynccontextmanager
async def build_stack(
    nats_url: str, kube: KubeClient, namespace: str, sim: ActionsSimulator
) -> AsyncIterator[Stack]:
    nc = await nats.connect(nats_url)
    stack = Stack(nats_url, nc, nc.jetstream(), kube, namespace, sim, sim.add_pat())
    try:
        yield stack
    finally:
        await stack.aclose()


def jsonable(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
