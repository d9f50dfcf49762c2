"""Wiring: NATS consumers -> work queue -> controllers; periodic resync; metrics.

:class:`ReconcilerApp` takes its connections from the caller (tests pass a nats-py connection
to a real nats-server and a KubeClient on the emulator); :func:`run` builds them from the
environment for ``python -m arcflow.reconciler``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import nats
import nats.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.trace import TracerProvider

from arcflow.common.events import EventBase, K8sObjectChanged, ScaleSetAssigned, ScaleSetDeleted
from arcflow.common.health import HealthServer
from arcflow.common.kube import (
    ConflictError,
    KubeClient,
)
from arcflow.common.nats import (
    CONSUMER_RECONCILER_K8S,
    CONSUMER_RECONCILER_SCALESETS,
    KV_SCALESETS,
    ConsumerSpec,
    Delivery,
    EventConsumer,
    NatsSettings,
    ensure_jetstream,
)
from arcflow.common.rpc.registrar import RegistrarRpcClient
from arcflow.common.tasks import cancel_and_wait
from arcflow.common.telemetry import extract_trace_context, setup_logging, setup_metrics
from arcflow.common.telemetry.tracing import trace_headers_of
from arcflow.reconciler.audit import Writer
from arcflow.reconciler.cache import build_cache, cached_keys
from arcflow.reconciler.controllers.ars import reconcile_ars
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.listener import reconcile_listener
from arcflow.reconciler.controllers.runner import reconcile_runner
from arcflow.reconciler.controllers.runner_set import reconcile_runner_set
from arcflow.reconciler.metrics import ReconcilerMetrics
from arcflow.reconciler.routing import keys_for
from arcflow.reconciler.scalesets import ScaleSetIds
from arcflow.reconciler.settings import ReconcilerSettings, reconciler_kube_settings
from arcflow.reconciler.workqueue import Key, Result, WorkQueue

log = logging.getLogger(__name__)

CONFLICT_RETRY_SECONDS = 0.05

_CONTROLLERS: dict[str, Callable[[Context, Key], Awaitable[Result]]] = {
    "ars": reconcile_ars,
    "al": reconcile_listener,
    "ers": reconcile_runner_set,
    "er": reconcile_runner,
}


class ReconcilerApp:
    """One reconciler replica: ``await start()``, then ``await stop()``."""

    def __init__(
        self,
        nc: NatsClient,
        kube: KubeClient,
        settings: ReconcilerSettings | None = None,
        *,
        meter: Meter | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.settings = settings or ReconcilerSettings()
        self.tracer = trace.get_tracer("arcflow.reconciler", tracer_provider=tracer_provider)
        # key -> the trace context of the newest event that enqueued it (consumed by the run)
        self._trace_parents: dict[Key, otel_context.Context] = {}
        self.nc = nc
        self.kube = kube
        self.js: JetStreamContext = nc.jetstream()
        self.metrics = ReconcilerMetrics(meter)
        self.queue = WorkQueue(
            self._reconcile,
            workers=self.settings.workers,
            retry_base_seconds=self.settings.retry_base_seconds,
            retry_cap_seconds=self.settings.retry_cap_seconds,
        )
        self.context = Context(
            kube=kube,
            writer=Writer(kube, self.js, self.metrics),
            build=self.settings.build_settings(),
            ids=None,
            registrar=RegistrarRpcClient(nc, timeout=self.settings.rpc_timeout_seconds),
            metrics=self.metrics,
            enqueue=self.queue.add,
            instance=self.settings.instance
            or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}",
            outdated_backoff_base=self.settings.outdated_backoff_base_seconds,
            outdated_backoff_cap=self.settings.outdated_backoff_cap_seconds,
        )
        # --- watch-fed cache (ADR 0010): reads from memory, writes seen at once ---
        self.cache = build_cache(
            kube,
            self.queue.add,
            self.settings.controller_namespace,
            relist_seconds=self.settings.cache_relist_seconds,
            delay_seconds=self.settings.cache_delay_seconds,
        )
        self.context.cache = self.context.writer.cache = self.cache
        self.context.create_concurrency = self.settings.create_concurrency
        # ---
        self._tasks: list[asyncio.Task[None]] = []
        self._consumers: list[asyncio.Task[None]] = []
        self.running = False
        self.layout_ready = False
        self.resynced = False
        self.health: HealthServer | None = None
        self.health_port: int | None = None

    @property
    def healthy(self) -> bool:
        """Live while started and no background task (consumer, resync) died."""
        return self.running and not any(t.done() for t in self._tasks)

    @property
    def ready(self) -> bool:
        """NATS connected, JetStream layout ensured, consumers running, first resync done."""
        return (
            self.healthy
            and self.nc.is_connected
            and self.layout_ready
            and bool(self._consumers)
            and not any(t.done() for t in self._consumers)
            and self.resynced
        )

    async def start_health_server(self, host: str | None = None, port: int | None = None) -> int:
        """Serve ``/healthz`` and ``/readyz`` (settings' host/port unless given)."""
        self.health = HealthServer(
            self.settings.health_host if host is None else host,
            self.settings.health_port if port is None else port,
            live=lambda: self.healthy,
            ready=lambda: self.ready,
            details=lambda: {
                "nats": self.nc.is_connected,
                "jetstream": self.layout_ready,
                "resynced": self.resynced,
            },
        )
        self.health_port = await self.health.start()
        return self.health_port

    async def _reconcile(self, key: Key) -> Result:
        attrs = {"kind": key.kind}
        started = time.perf_counter()
        self.metrics.reconciles.add(1, attrs)
        # Continue the trace of the event that asked for this key (a child of its context);
        # a key from the resync or a requeue starts a trace of its own.
        parent = self._trace_parents.pop(key, None)
        with self.tracer.start_as_current_span(
            f"reconcile {key.kind}",
            context=parent,
            attributes={"arcflow.key": str(key), "arcflow.kind": key.kind},
        ) as span:
            try:
                return await _CONTROLLERS[key.kind](self.context, key)
            except ConflictError:
                span.set_attribute("arcflow.conflict", True)
                return Result.again(CONFLICT_RETRY_SECONDS)  # stale read: re-read and retry
            except Exception:
                self.metrics.errors.add(1, attrs)
                raise
            finally:
                self.metrics.duration.record(time.perf_counter() - started, attrs)

    async def _on_event(self, event: EventBase, delivery: Delivery) -> None:
        parent = extract_trace_context(delivery.headers or trace_headers_of(event.trace))
        has_trace = trace.get_current_span(parent).get_span_context().is_valid
        for key in keys_for(event, self.settings.controller_namespace):
            if has_trace:
                self._trace_parents[key] = parent
            self.queue.add(key)

    async def start(self) -> None:
        specs = [CONSUMER_RECONCILER_K8S, CONSUMER_RECONCILER_SCALESETS]
        await ensure_jetstream(self.js, consumers=specs)  # only its own durables
        self.layout_ready = True
        self.context.ids = ScaleSetIds(await self.js.key_value(KV_SCALESETS.bucket))
        self._tasks.extend(self.cache.start())  # cache first: reconciles read from it
        await self.cache.synced()
        self.queue.start()
        for spec in specs:
            task = asyncio.create_task(self._consume(spec), name=spec.durable)
            self._consumers.append(task)
            self._tasks.append(task)
        self._tasks.append(asyncio.create_task(self._resync_forever(), name="resync"))
        self.running = True
        await self.resync()
        self.resynced = True

    async def resync(self) -> None:
        """Enqueue every cached object of the four kinds (no API call; the cache's own
        periodic relist guards against drift)."""
        for key in cached_keys(self.cache):
            self.queue.add(key)

    async def _resync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_interval_seconds)
            try:
                await self.resync()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("resync failed", extra={"error": type(exc).__name__})

    async def _consume(self, spec: ConsumerSpec) -> None:
        spec = replace(spec, retry_delay_seconds=self.settings.retry_base_seconds)
        settler = EventConsumer(
            spec,
            self._on_event,
            service="reconciler",
            event_types=(K8sObjectChanged, ScaleSetAssigned, ScaleSetDeleted),
            dead_letter_target=self.js,
        )
        subscription = await self.js.pull_subscribe_bind(durable=spec.durable, stream=spec.stream)
        try:
            while True:
                try:
                    messages = await subscription.fetch(
                        self.settings.fetch_batch, timeout=self.settings.fetch_timeout_seconds
                    )
                except (nats.errors.TimeoutError, TimeoutError):
                    continue
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("fetch failed: %s", type(exc).__name__)
                    await asyncio.sleep(self.settings.fetch_timeout_seconds)
                    continue
                for message in messages:
                    await settler.process(message)
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def stop(self) -> None:
        self.running = False
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        self._consumers.clear()
        await self.queue.stop()
        await self.cache.stop()
        if self.health is not None:
            await self.health.stop()
            self.health = None


async def connect_nats(settings: ReconcilerSettings) -> NatsClient:
    """Connect as the reconciler: ``ARCFLOW_NATS_*`` settings, the reconciler's own inbox.

    The inbox prefix (``_INBOX_reconciler``) is where the registrar's JIT configs come back;
    only the reconciler's NATS user may subscribe to it.
    """
    nats_settings = NatsSettings(name=settings.instance or "reconciler")
    return await nats.connect(**nats_settings.connect_options("reconciler"))


async def run(
    settings: ReconcilerSettings | None = None, *, stop_event: asyncio.Event | None = None
) -> None:
    settings = settings or ReconcilerSettings()
    setup_logging("reconciler", json_output=settings.log_json, level=settings.log_level)
    metrics_server = setup_metrics(
        "reconciler", host=settings.metrics_host, port=settings.metrics_port
    )
    nc = await connect_nats(settings)
    kube = await KubeClient.from_settings(reconciler_kube_settings())
    app = ReconcilerApp(nc, kube, settings, meter=metrics_server.meter)
    try:
        await app.start_health_server()
        await app.start()
        await (stop_event or asyncio.Event()).wait()
    finally:
        await app.stop()
        await kube.close()
        await nc.drain()
        metrics_server.stop()
