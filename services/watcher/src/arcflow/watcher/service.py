"""The watcher service: one kind watcher per kind and scope, health and readiness endpoints.

It never decides anything: it announces what changed in the cluster and leaves every
decision to the services that consume ``arc.k8s.>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import nats
from aiohttp import web
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from opentelemetry.metrics import Meter

from arcflow.common.health import HealthServer
from arcflow.common.kube import ARC_RESOURCES, POD, SECRET, KubeClient, Resource
from arcflow.common.nats.jetstream import ensure_jetstream
from arcflow.common.tasks import cancel_and_wait, consume_results
from arcflow.common.telemetry import setup_metrics
from arcflow.watcher.kind_watcher import KindWatcher, WatchScope, WatchTiming
from arcflow.watcher.metrics import WatcherMetrics
from arcflow.watcher.outbox import EventPublisher, ResumeStore
from arcflow.watcher.settings import WatcherSettings

log = logging.getLogger(__name__)

SERVICE_NAME = "watcher"


def watch_scopes(settings: WatcherSettings) -> list[WatchScope]:
    """Every kind and scope to watch: the four ARC kinds unfiltered, Pods and Secrets by label.

    One scope per configured namespace, or one cluster-wide scope per kind when no namespace
    is configured.
    """
    selectors: list[tuple[Resource, str | None]] = [(r, None) for r in ARC_RESOURCES]
    selectors += [(POD, settings.pod_label_selector), (SECRET, settings.secret_label_selector)]
    namespaces: Sequence[str | None] = settings.namespaces or [None]
    return [
        WatchScope(resource, namespace, selector or None)
        for resource, selector in selectors
        for namespace in namespaces
    ]


def timing_of(settings: WatcherSettings) -> WatchTiming:
    return WatchTiming(
        resync_interval=settings.resync_interval_seconds,
        checkpoint_interval=settings.checkpoint_interval_seconds,
        watch_timeout=settings.watch_timeout_seconds,
        backoff_initial=settings.backoff_initial_seconds,
        backoff_max=settings.backoff_max_seconds,
    )


class WatcherService:
    """All kind watchers of one process, plus the health server; run it with :meth:`run`."""

    def __init__(
        self,
        settings: WatcherSettings,
        *,
        kube: KubeClient,
        js: JetStreamContext,
        meter: Meter,
    ) -> None:
        self.settings = settings
        self.metrics = WatcherMetrics(meter)
        publisher = EventPublisher(
            js,
            self.metrics,
            timeout=settings.publish_timeout_seconds,
            backoff_initial=settings.backoff_initial_seconds,
            backoff_max=settings.backoff_max_seconds,
        )
        store = ResumeStore(js)
        timing = timing_of(settings)
        self.watchers = [
            KindWatcher(scope, kube, publisher, store, self.metrics, timing)
            for scope in watch_scopes(settings)
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self._health: HealthServer | None = None
        self.health_port: int | None = None

    # --- state ----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Ready once the first list of every kind and scope has been published."""
        return all(w.synced.is_set() for w in self.watchers)

    @property
    def healthy(self) -> bool:
        """Healthy while every kind watcher is still running."""
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

    async def wait_ready(self) -> None:
        """Wait until :attr:`ready` (wrap in ``asyncio.timeout``)."""
        await asyncio.gather(*(w.synced.wait() for w in self.watchers))

    # --- health server --------------------------------------------------------------------

    def _health_server(self, host: str, port: int) -> HealthServer:
        return HealthServer(
            host,
            port,
            live=lambda: self.healthy,
            ready=lambda: self.ready,
            details=lambda: {
                "pending": sorted(w.scope.label for w in self.watchers if not w.synced.is_set())
            },
        )

    def health_app(self) -> web.Application:
        """The ``/healthz`` + ``/readyz`` application (``arcflow.common.health``)."""
        return self._health_server("127.0.0.1", 0).app()

    async def start_health_server(self, host: str, port: int) -> int:
        """Serve ``/healthz`` and ``/readyz``; returns the bound port (``port=0`` picks one)."""
        server = self._health_server(host, port)
        self.health_port = await server.start()
        self._health = server
        return self.health_port

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start every kind watcher in the background."""
        self._tasks = [
            asyncio.create_task(w.run(), name=f"watch {w.scope.label}") for w in self.watchers
        ]
        for task in self._tasks:
            task.add_done_callback(_log_crash)

    async def stop(self) -> None:
        """Cancel the watchers (each saves its resume point) and stop the health server."""
        await cancel_and_wait(self._tasks)
        consume_results(self._tasks)
        self._tasks = []
        if self._health is not None:
            await self._health.stop()
            self._health = None

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set or a kind watcher dies (then raise its error)."""
        self.start()
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [stopper, *self._tasks], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not stopper and task.exception() is not None:
                    raise RuntimeError(f"{task.get_name()} failed") from task.exception()
        finally:
            stopper.cancel()
            await self.stop()


def _log_crash(task: asyncio.Task[None]) -> None:
    """A kind watcher only ends by cancellation; anything else is a bug worth a loud log."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("kind watcher crashed", extra={"task": task.get_name()}, exc_info=exc)


async def connect_nats(settings: WatcherSettings) -> NatsClient:
    """Connect with unlimited reconnects (settings permitting), logging state changes."""

    async def on_disconnect() -> None:
        log.warning("NATS disconnected")

    async def on_reconnect() -> None:
        log.info("NATS reconnected")

    async def on_error(exc: Exception) -> None:
        log.warning("NATS error", extra={"error": type(exc).__name__})

    options = settings.nats.connect_options(SERVICE_NAME)
    options.setdefault("name", f"arcflow-{SERVICE_NAME}")
    client: NatsClient = await nats.connect(
        **options,
        reconnect_time_wait=0.5,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        error_cb=on_error,
    )
    return client


async def serve(settings: WatcherSettings, stop: asyncio.Event) -> None:
    """The whole process: metrics, NATS, JetStream layout, Kubernetes, watchers, health."""
    metrics_server = setup_metrics(
        SERVICE_NAME, host=settings.metrics_host, port=settings.metrics_port
    )
    nc: NatsClient | None = None
    kube: KubeClient | None = None
    try:
        nc = await connect_nats(settings)
        js = nc.jetstream()
        await ensure_jetstream(js, consumers=())
        kube = await KubeClient.from_settings(settings.kube)
        service = WatcherService(settings, kube=kube, js=js, meter=metrics_server.meter)
        port = await service.start_health_server(settings.health_host, settings.health_port)
        log.info(
            "watcher started",
            extra={
                "scopes": [w.scope.label for w in service.watchers],
                "health_port": port,
                "metrics_port": metrics_server.port,
            },
        )
        await service.run(stop)
    finally:
        if kube is not None:
            await kube.close()
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.drain()
        metrics_server.stop()
        log.info("watcher stopped")
