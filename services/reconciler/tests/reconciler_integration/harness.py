"""A real nats-server, the Kubernetes emulator and one reconciler, wired for tests.

The registrar is stood in for by (a) KV records written the way it writes them and (b) a tiny
RPC responder on the registrar subjects that hands out fake JIT configs and records calls.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from arcflow.common import subjects
from arcflow.common.events import K8sObjectChanged, ObjectWritten, parse_event
from arcflow.common.kube import KubeClient
from arcflow.common.nats import KV_SCALESETS, ensure_jetstream, publish_event
from arcflow.common.scaleset_records import record_key
from arcflow.reconciler.app import ReconcilerApp
from arcflow.reconciler.settings import ReconcilerSettings

CONTROLLER_NS = "arc-systems"
SECRET_NAME = "github-creds"
TOKEN = "ghp_supersecrettoken123"
JIT_PREFIX = "jit-secret-config-"


async def eventually(
    check: Callable[[], Awaitable[Any]],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - a polling deadline, not a cancel scope
    interval: float = 0.05,
) -> Any:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value:
                return value
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {last}")
        await asyncio.sleep(interval)


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

    async def start(self) -> None:
        await self.nc.subscribe(subjects.RPC_REGISTRAR_JITCONFIG, cb=self._jit)
        await self.nc.subscribe(subjects.RPC_REGISTRAR_REMOVE_RUNNER, cb=self._remove)
        await self.nc.subscribe(subjects.RPC_REGISTRAR_GET_RUNNER, cb=self._get)

    async def _jit(self, msg: Msg) -> None:
        request = json.loads(msg.data)
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
        self.removed.append(json.loads(msg.data)["runner_id"])
        await msg.respond(json.dumps({"ok": True, "result": {"outcome": "ok"}}).encode())

    async def _get(self, msg: Msg) -> None:
        await msg.respond(json.dumps({"ok": True, "result": {"runner": None}}).encode())


@dataclass
class Stack:
    nc: NatsClient
    kube: KubeClient
    namespace: str
    app: ReconcilerApp
    rpc: FakeRegistrarRpc

    @property
    def js(self) -> Any:
        return self.nc.jetstream()

    async def register(self, ars: str, variant: str, scale_set_id: int) -> None:
        """Write the KV record the registrar writes after registering a variant."""
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
        await kv.put(record_key(self.namespace, ars, variant), json.dumps(record).encode())

    async def publish_change(self, resource: str, name: str, namespace: str | None = None) -> None:
        """What the watcher publishes when an object changes."""
        ns = namespace or self.namespace
        obj = await self.kube.get(_KINDS[resource], name, ns)
        meta = obj["metadata"]
        event = K8sObjectChanged(
            source="test-watcher",
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            resource=resource,
            namespace=ns,
            name=name,
            uid=meta["uid"],
            change="MODIFIED",
            resource_version=meta["resourceVersion"],
            labels=meta.get("labels") or {},
        )
        await publish_event(self.js, subjects.k8s_subject(resource, ns, name), event)

    async def apply_ars(self, manifest: dict[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        try:
            current = await self.kube.get("AutoscalingRunnerSet", name, self.namespace)
        except Exception:
            await self.kube.create(manifest)
        else:
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {**dict.fromkeys(current["spec"]), **manifest["spec"]},
            }
            await self.kube.patch_merge(
                "AutoscalingRunnerSet", name, patch, namespace=self.namespace
            )
        await self.publish_change("autoscalingrunnersets", name)

    async def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return (await self.kube.list(kind, namespace=namespace or self.namespace)).items

    async def audit_events(self) -> list[ObjectWritten]:
        js = self.js
        sub = await js.subscribe("arc.audit.>", ordered_consumer=True)
        events: list[ObjectWritten] = []
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.3)
                except nats.errors.TimeoutError:
                    break
                event = parse_event(msg.data)
                assert isinstance(event, ObjectWritten)
                events.append(event)
        finally:
            await sub.unsubscribe()
        return events


_KINDS = {
    "autoscalingrunnersets": "AutoscalingRunnerSet",
    "ephemeralrunnersets": "EphemeralRunnerSet",
    "ephemeralrunners": "EphemeralRunner",
    "autoscalinglisteners": "AutoscalingListener",
}


def reconciler_test_settings() -> ReconcilerSettings:
    return ReconcilerSettings(
        controller_namespace=CONTROLLER_NS,
        listener_image="ghcr.io/arcflow/listener:test",
        listener_image_pull_secrets=["regcred"],
        workers=4,
        retry_base_seconds=0.05,
        retry_cap_seconds=0.5,
        resync_interval_seconds=3600,
        fetch_timeout_seconds=0.2,
        rpc_timeout_seconds=2,
    )


@asynccontextmanager
async def build_stack(nats_url: str, kube: KubeClient, namespace: str) -> AsyncIterator[Stack]:
    nc = await nats.connect(nats_url)
    await ensure_jetstream(nc.jetstream())
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET_NAME, "namespace": namespace},
            "data": {"github_token": base64.b64encode(TOKEN.encode()).decode()},
        }
    )
    rpc = FakeRegistrarRpc(nc)
    await rpc.start()
    app = ReconcilerApp(nc, kube, reconciler_test_settings())
    await app.start()
    try:
        yield Stack(nc, kube, namespace, app, rpc)
    finally:
        await app.stop()
        await nc.drain()
