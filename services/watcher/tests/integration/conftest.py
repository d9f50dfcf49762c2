"""Harness for the watcher's integration tests: a real kube-apiserver, a real nats-server.

The watcher talks to the server through a fault proxy (``harness.faults``: cut watches, held
or refused requests, the recorded requests); the test's own writes go the same way, as the
admin. Each test watches its own namespace, so tests sharing the session nats-server (and its
ARC_K8S stream and watcher KV bucket) never see each other's events. A test that needs a fault
no real server gives uses ``emulator_harness`` and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from arcflow.common import constants
from arcflow.common.events import K8sObjectChanged, parse_event
from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.kube import NotFoundError as KubeNotFound
from arcflow.common.nats.jetstream import STREAM_K8S
from arcflow.common.nats.settings import NatsSettings
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.common.telemetry import MetricsServer, setup_metrics
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.watcher.service import SERVICE
from arcflow.watcher.settings import WatcherSettings
from arcflow.watcher.watchers import WatcherService
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.polling import eventually

OWNED = {constants.LABEL_PART_OF: constants.PART_OF_VALUE}


@dataclass(frozen=True)
class Seen:
    """One stored stream message, decoded."""

    seq: int
    subject: str
    event: K8sObjectChanged
    headers: dict[str, str]
    raw: bytes

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.event.resource, self.event.name, self.event.change)


def manifest(kind: str, name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    """A minimal valid object of one of the watched kinds."""
    api_version = "v1" if kind in ("Pod", "Secret") else constants.API_VERSION
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(OWNED)},
    }
    if kind == "Pod":
        body["spec"] = {"containers": [{"name": "runner", "image": "ghcr.io/actions/runner"}]}
    elif kind == "Secret":
        body["data"] = {}
    elif kind == "EphemeralRunnerSet":  # what its CRD requires
        body["spec"] = {"replicas": 0, "patchID": 0}
    elif kind == "EphemeralRunner":
        body["spec"] = {
            "githubConfigUrl": "https://github.com/arcflow-test",
            "githubConfigSecret": "arcflow-test",
            "runnerScaleSetId": 1,
        }
    else:
        body["spec"] = {"githubConfigUrl": "https://github.com/arcflow-test"}
    body.update(extra)
    return body


def metric_value(exposition: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for line in exposition.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


@dataclass
class WatcherHarness:
    """A watcher service over the test's Kubernetes API and NATS, plus stream/metrics readers.

    ``kube`` is what the watcher uses (and the test writes with); ``kubeconfig`` points at the
    same endpoint. ``proxy`` is the fault proxy in front of the real server (``None`` on the
    emulator), ``emulator`` the emulator (``None`` on the real server)."""

    kube: KubeClient
    nats_url: str
    namespace: str
    kubeconfig: Path
    proxy: KubeFaultProxy | None = None
    emulator: KubeEmulator | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    nc: NatsClient | None = None
    js: JetStreamContext | None = None
    service: WatcherService | None = None
    runtime: ServiceRuntime | None = None
    metrics: MetricsServer | None = None
    _reader: NatsClient | None = None

    manifest = staticmethod(manifest)
    metric_value = staticmethod(metric_value)

    @property
    def faults(self) -> KubeFaultProxy:
        """The fault proxy (the test is skipped without a real server to stand in front of)."""
        if self.proxy is None:
            pytest.skip("needs the fault proxy in front of a real kube-apiserver")
        return self.proxy

    def settings(self) -> WatcherSettings:
        values: dict[str, Any] = {
            "namespaces": [self.namespace],
            "resync_interval_seconds": 0,
            "checkpoint_interval_seconds": 0.1,
            "backoff_initial_seconds": 0.05,
            "backoff_max_seconds": 0.5,
            "publish_timeout_seconds": 1.0,
            "health_host": "127.0.0.1",
            "health_port": 0,
            "nats": NatsSettings(url=self.nats_url),
        }
        values.update(self.overrides)
        return WatcherSettings(**values)

    async def start(self, *, wait_ready: bool = True) -> WatcherService:
        """The watcher through the service runtime (health server on, shared metrics)."""
        settings = self.settings()
        if self.nc is None:
            self.nc = await nats.connect(self.nats_url)
            self.js = self.nc.jetstream()
        if self.metrics is None:
            self.metrics = setup_metrics("watcher-test", host="127.0.0.1", port=0)
        self.runtime = ServiceRuntime(
            SERVICE, settings, kube=self.kube, meter=self.metrics.meter, serve_metrics=False
        )
        await self.runtime.start()
        self.service = self.runtime.state
        if wait_ready:
            async with asyncio.timeout(5):
                await self.service.wait_ready()
        return self.service

    async def stop_service(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()
            self.runtime = None
            self.service = None

    async def close(self) -> None:
        await self.stop_service()
        for client in (self.nc, self._reader):
            if client is not None and not client.is_closed:
                with contextlib.suppress(Exception):
                    await client.close()
        if self.metrics is not None:
            self.metrics.stop()

    # --- reading the stream ---------------------------------------------------------------

    async def _reader_js(self) -> JetStreamContext:
        if self._reader is None or self._reader.is_closed:
            self._reader = NatsClient()
            await self._reader.connect(self.nats_url, max_reconnect_attempts=-1)
        return self._reader.jetstream()

    async def events(self, subject_filter: str | None = None) -> list[Seen]:
        """Every stored message of this test's namespace (or ``subject_filter``), in order."""
        js = await self._reader_js()
        subject_filter = subject_filter or f"arc.k8s.*.{self.namespace}.>"
        seen: list[Seen] = []
        seq = 0
        while True:
            try:
                msg = await js.get_msg(
                    STREAM_K8S.name, seq=seq + 1, subject=subject_filter, next=True
                )
            except NotFoundError:
                return seen
            seq = msg.seq or seq + 1
            data = msg.data or b""
            event = parse_event(data)
            assert isinstance(event, K8sObjectChanged)
            seen.append(Seen(seq, msg.subject or "", event, dict(msg.headers or {}), data))

    async def wait_events(
        self,
        predicate: Callable[[list[Seen]], bool],
        within: float = 5.0,
        subject_filter: str | None = None,
    ) -> list[Seen]:
        """Poll the stream until ``predicate`` holds (then return the events) or fail."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            got = await self.events(subject_filter)
            if predicate(got):
                return got
            if loop.time() > deadline:
                pytest.fail(f"timed out; stream has {[s.key for s in got]}")
            await asyncio.sleep(0.05)

    async def wait_keys(
        self, expected: list[tuple[str, str, str]], within: float = 20.0
    ) -> list[Seen]:
        """Wait until every expected (resource, name, change) is stored; return all events."""
        return await self.wait_events(
            lambda got: all(k in {s.key for s in got} for k in expected), within
        )

    async def scrape(self) -> str:
        assert self.metrics is not None
        async with aiohttp.ClientSession() as http, http.get(self.metrics.url) as resp:
            return await resp.text()

    async def health(self, path: str) -> tuple[int, dict[str, Any]]:
        assert self.runtime is not None
        assert self.runtime.health_port is not None
        url = f"http://127.0.0.1:{self.runtime.health_port}{path}"
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status, json.loads(await resp.text())


async def _default_service_account(kube: KubeClient, namespace: str) -> None:
    """kube-controller-manager makes it about a second after the namespace; until then the
    ServiceAccount admission plugin refuses pods."""

    async def made() -> bool:
        try:
            await kube.get("ServiceAccount", "default", namespace)
        except KubeNotFound:
            return False
        return True

    await eventually(made, what=f"the default ServiceAccount of {namespace}")


def _proxy_possible() -> bool:
    return backend() == APISERVER and not real_kubeconfig()


async def _client(kubeconfig: Path) -> KubeClient:
    return await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000, request_timeout=10)
    )


@asynccontextmanager
async def harness_on(
    plane: ControlPlane, nats_url: str, tmp_path: Path, namespace: str | None = None
) -> AsyncIterator[WatcherHarness]:
    """A harness on ``plane`` (e.g. a private one a test restarts), through a fault proxy,
    in a new namespace of its own."""
    namespace = namespace or f"w-{uuid.uuid4().hex[:10]}"
    async with KubeFaultProxy.for_control_plane(plane) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / f"{namespace}.kubeconfig")
        async with await _client(kubeconfig) as kube:
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            await _default_service_account(kube, namespace)
            h = WatcherHarness(kube, nats_url, namespace, kubeconfig, proxy=proxy)
            try:
                yield h
            finally:
                await h.close()


@pytest.fixture
def namespace(kube_namespace: str) -> str:
    return kube_namespace


@pytest.fixture
async def harness(
    request: pytest.FixtureRequest,
    kube_client: KubeClient,
    kube_kubeconfig: str,
    nats_url: str,
    namespace: str,
    on_real_server: bool,
    tmp_path: Path,
) -> AsyncIterator[WatcherHarness]:
    """The watcher on the session's real server through a fault proxy (on the emulator
    backend: straight to the emulator, and ``faults`` skips)."""
    if on_real_server:
        await _default_service_account(kube_client, namespace)
    if not (on_real_server and _proxy_possible()):
        h = WatcherHarness(kube_client, nats_url, namespace, Path(kube_kubeconfig))
        try:
            yield h
        finally:
            await h.close()
        return
    plane: ControlPlane = request.getfixturevalue("control_plane")
    async with KubeFaultProxy.for_control_plane(plane) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")
        async with await _client(kubeconfig) as kube:
            h = WatcherHarness(kube, nats_url, namespace, kubeconfig, proxy=proxy)
            try:
                yield h
            finally:
                await h.close()


@pytest.fixture
async def emulator_harness(
    kube_emulator: KubeEmulator,
    kube_client: KubeClient,
    kube_kubeconfig: str,
    nats_url: str,
    namespace: str,
) -> AsyncIterator[WatcherHarness]:
    """On the emulator, for a fault no real server can be made to give."""
    h = WatcherHarness(
        kube_client, nats_url, namespace, Path(kube_kubeconfig), emulator=kube_emulator
    )
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def harness_factory(
    harness: WatcherHarness,
) -> AsyncIterator[Callable[[str], Awaitable[WatcherHarness]]]:
    """Build harnesses on another NATS (e.g. ``private_nats_server.url``); closed at the end."""
    made: list[WatcherHarness] = []

    async def make(nats_url: str) -> WatcherHarness:
        h = WatcherHarness(
            harness.kube, nats_url, harness.namespace, harness.kubeconfig, proxy=harness.proxy
        )
        made.append(h)
        return h

    try:
        yield make
    finally:
        for h in made:
            await h.close()
