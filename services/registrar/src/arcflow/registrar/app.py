"""Wiring: NATS, JetStream layout, KV buckets, consumers, sweep, RPC server, health endpoints.

:class:`RegistrarApp` takes its connections from the caller (tests pass a NATS connection to a
real nats-server, a KubeClient on the emulator, and a client factory pointed at the Actions
simulator); :func:`run` builds them from the environment for ``python -m arcflow.registrar``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable

import nats
from nats.aio.client import Client as NatsClient
from opentelemetry.metrics import Meter

from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.retry import RetryPolicy
from arcflow.common.health import HealthServer
from arcflow.common.kube import KubeClient
from arcflow.common.kube.settings import KubeSettings
from arcflow.common.nats import (
    KV_SCALESETS,
    NatsSettings,
    ensure_bucket,
    ensure_jetstream,
)
from arcflow.common.tasks import cancel_and_wait
from arcflow.common.telemetry import setup_logging, setup_metrics
from arcflow.registrar.consumer import (
    CONSUMER_REGISTRAR_ARS,
    CONSUMER_REGISTRAR_ERS,
    ChangeConsumer,
)
from arcflow.registrar.credentials import ActionsClientCache, ClientFactory, Credentials
from arcflow.registrar.locks import LOCKS_BUCKET, LeaseLocks
from arcflow.registrar.lookup import JitLookup
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.rpc_server import RegistrarRpcServer
from arcflow.registrar.service import Registrar
from arcflow.registrar.settings import RegistrarSettings

log = logging.getLogger(__name__)


def default_client_factory(settings: RegistrarSettings) -> ClientFactory:
    retry = RetryPolicy(
        max_retries=settings.actions_max_retries,
        backoff_max=settings.actions_retry_wait_max_seconds,
    )

    def build(config_url: str, credentials: Credentials) -> ActionsClient:
        return ActionsClient(config_url, credentials, retry=retry)

    return build


class RegistrarApp:
    """One registrar replica. ``start`` then ``stop``; ``ready`` tells readiness."""

    def __init__(
        self,
        nc: NatsClient,
        kube: KubeClient,
        settings: RegistrarSettings | None = None,
        *,
        client_factory: ClientFactory | None = None,
        meter: Meter | None = None,
        serve_health: bool = True,
        run_sweep: bool = True,
    ) -> None:
        self.settings = settings or RegistrarSettings()
        self.instance = self.settings.instance or f"{socket.gethostname()}-{os.getpid()}"
        self.nc = nc
        self.kube = kube
        self.js = nc.jetstream()
        self.metrics = RegistrarMetrics(meter)
        self.clients = ActionsClientCache(
            client_factory or default_client_factory(self.settings),
            max_size=self.settings.client_cache_size,
        )
        self._serve_health = serve_health
        self._run_sweep = run_sweep
        self.registrar: Registrar | None = None
        self.consumers: list[ChangeConsumer] = []
        self.rpc: RegistrarRpcServer | None = None
        self.lookup: JitLookup | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._health: HealthServer | None = None
        self.health_port: int | None = None
        self._started = False

    @property
    def ready(self) -> bool:
        return self._started and self.nc.is_connected and all(c.running for c in self.consumers)

    async def start(self) -> None:
        await ensure_jetstream(self.js, consumers=[CONSUMER_REGISTRAR_ARS, CONSUMER_REGISTRAR_ERS])
        await ensure_bucket(self.js, LOCKS_BUCKET)
        records = await self.js.key_value(KV_SCALESETS.bucket)
        locks = LeaseLocks(
            await self.js.key_value(LOCKS_BUCKET.bucket),
            self.instance,
            ttl_seconds=self.settings.lock_ttl_seconds,
            wait_seconds=self.settings.lock_wait_seconds,
        )
        self.registrar = Registrar(
            kube=self.kube,
            js=self.js,
            records=records,
            locks=locks,
            clients=self.clients,
            metrics=self.metrics,
        )
        # --- JIT requests answered from memory (ADR 0010) ---
        self.lookup = JitLookup(self.kube, records, self.clients)
        await self.lookup.start()
        # ---
        self.rpc = RegistrarRpcServer(
            self.nc, self.registrar, concurrency=self.settings.rpc_concurrency, lookup=self.lookup
        )
        await self.rpc.start()
        for spec in (CONSUMER_REGISTRAR_ARS, CONSUMER_REGISTRAR_ERS):
            consumer = ChangeConsumer(
                self.js,
                self.registrar,
                spec,
                batch=self.settings.fetch_batch,
                fetch_timeout=self.settings.fetch_timeout_seconds,
                retry_delay_seconds=self.settings.retry_delay_seconds,
                retry_delay_cap_seconds=self.settings.retry_delay_cap_seconds,
            )
            await consumer.start()
            self.consumers.append(consumer)
        if self._run_sweep:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="registrar-sweep")
        if self._serve_health:
            await self._start_health()
        self._started = True
        log.info("registrar started", extra={"instance": self.instance})

    async def _sweep_forever(self) -> None:
        assert self.registrar is not None
        while True:
            await asyncio.sleep(self.settings.resync_interval_seconds)
            try:
                await self.registrar.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("sweep failed", extra={"error": type(exc).__name__})

    async def _start_health(self) -> None:
        """``/healthz`` + ``/readyz`` through the shared ``arcflow.common.health`` server."""
        server = HealthServer(
            self.settings.health_host,
            self.settings.health_port,
            live=lambda: True,
            ready=lambda: self.ready,
        )
        self.health_port = await server.start()
        self._health = server

    async def stop(self) -> None:
        self._started = False
        if self._sweeper is not None:
            await cancel_and_wait([self._sweeper])
        for consumer in self.consumers:
            await consumer.stop()
        self.consumers.clear()
        if self.rpc is not None:
            await self.rpc.stop()
        if self.lookup is not None:
            await self.lookup.stop()
        if self._health is not None:
            await self._health.stop()
            self._health = None
        await self.clients.aclose()


async def connect_nats(settings: RegistrarSettings) -> NatsClient:
    """Connect as the registrar: ``ARCFLOW_NATS_*`` settings, the registrar's own inbox."""
    nats_settings = NatsSettings(name=settings.instance or "registrar")
    return await nats.connect(**nats_settings.connect_options("registrar"))


async def run(
    settings: RegistrarSettings | None = None,
    *,
    stop_event: asyncio.Event | None = None,
    on_started: Callable[[RegistrarApp], None] | None = None,
) -> None:
    """Run one replica until ``stop_event`` is set (or the task is cancelled)."""
    settings = settings or RegistrarSettings()
    setup_logging("registrar", json_output=settings.log_json, level=settings.log_level)
    metrics_server = setup_metrics(
        "registrar", host=settings.metrics_host, port=settings.metrics_port
    )
    nc = await connect_nats(settings)
    kube = await KubeClient.from_settings(KubeSettings())
    app = RegistrarApp(nc, kube, settings, meter=metrics_server.meter)
    try:
        await app.start()
        if on_started is not None:
            on_started(app)
        await (stop_event or asyncio.Event()).wait()
    finally:
        await app.stop()
        await kube.close()
        await nc.drain()
        metrics_server.stop()
