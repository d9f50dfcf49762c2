"""Runs any :class:`~arcflow.common.service.spec.ServiceSpec`, in this order:

settings (given) -> metrics -> NATS (one connection, the service's inbox prefix) -> JetStream
layout -> Kubernetes client (only when the spec declares ``kube_settings``) -> the service's
state -> components -> health server -> subscribers -> periodic tasks; :meth:`stop` undoes it
in reverse. Used by :func:`arcflow.common.service.main` (a process) and by
:mod:`arcflow.common.service.inprocess` (tests: several services in one event loop).

The spec picks the light path (ADR 0070): without subscriptions the connection is plain
nats-py (no FastStream imported), ``streams`` narrows the layout, ``runtime_servers=False``
starts neither the metrics nor the health server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arcflow.common.nats.jetstream import (
    ConsumerSpec,
    ensure_bucket,
    ensure_consumer,
    ensure_jetstream,
    ensure_stream,
)
from arcflow.common.service.connection import (
    DependencyUnavailableError,
    ErrorHook,
    connect_plain,
    make_service_broker,
)
from arcflow.common.service.context import ServiceContext
from arcflow.common.service.spec import Component, PeriodicTask, ServiceSpec
from arcflow.common.tasks import cancel_and_wait

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.aio.client import Client as NatsClient
    from nats.js import JetStreamContext
    from opentelemetry.metrics import Meter

    from arcflow.common.health import HealthServer
    from arcflow.common.kube import KubeClient
    from arcflow.common.nats.settings import NatsSettings
    from arcflow.common.telemetry.metrics import MetricsServer

log = logging.getLogger("arcflow.service")

#: How long the first NATS connection may take before the start counts as failed.
STARTUP_CONNECT_SECONDS = 30.0


class ServiceRuntime:
    """One running service. ``await start()``, then ``await stop()`` (or :meth:`run`).

    Tests pass ``nats_settings`` (e.g. a restricted user), ``kube`` (a client they own and
    close), ``meter`` (one metrics server for several services), ``overrides`` (see
    :class:`ServiceContext`), turn off the health/metrics servers or the periodic tasks.
    """

    def __init__(
        self,
        spec: ServiceSpec[Any],
        settings: Any = None,
        *,
        nats_settings: NatsSettings | None = None,
        kube: KubeClient | None = None,
        meter: Meter | None = None,
        overrides: Mapping[str, Any] | None = None,
        serve_health: bool = True,
        serve_metrics: bool = True,
        on_nats_error: ErrorHook | None = None,
        fetch_timeout: float | None = None,
        run_periodic: bool = True,
    ) -> None:
        self.spec = spec
        self.settings: Any = settings if settings is not None else spec.settings()
        self._nats_settings = nats_settings
        self._given_kube = kube
        self._meter = meter
        self._overrides = dict(overrides or {})
        self._serve_health = serve_health
        self._serve_metrics = serve_metrics
        self._on_nats_error = on_nats_error
        self._fetch_timeout = fetch_timeout
        self._run_periodic = run_periodic
        self.broker: NatsBroker | None = None
        self._plain: NatsClient | None = None
        self.context: ServiceContext | None = None
        self.state: Any = None
        self.components: list[Component] = []
        self._subscribers: list[Any] = []
        self._periodic: list[asyncio.Task[None]] = []
        self._metrics: MetricsServer | None = None
        self._health: HealthServer | None = None
        self._kube: KubeClient | None = None
        self.health_port: int | None = None
        self.started = False
        self._closing = False
        self.failure: BaseException | None = None
        self._failed = asyncio.Event()

    # --- state ----------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """Live: started, nothing fatal happened, every periodic task and component alive."""
        return (
            self.started
            and self.failure is None
            and not any(t.done() for t in self._periodic)
            and all(c.healthy for c in self.components)
        )

    @property
    def ready(self) -> bool:
        """Ready: healthy, NATS connected, every component and the service itself ready."""
        context = self.context
        return (
            self.healthy
            and context is not None
            and context.nc.is_connected
            and all(getattr(s, "running", True) for s in self._subscribers)
            and all(c.ready for c in self.components)
            and (self.spec.ready is None or bool(self.spec.ready(self.state)))
        )

    def fatal(self, exc: BaseException) -> None:
        """Stop the service with an error (exit code 1 under ``main``)."""
        if self.failure is None:
            self.failure = exc
            log.error(
                "service failed: %s",
                exc,
                extra={"service": self.spec.name, "error": type(exc).__name__},
            )
        self._failed.set()

    # --- start ----------------------------------------------------------------------------

    def _instance(self) -> str:
        configured = getattr(self.settings, "instance", "") or ""
        return configured or f"{socket.gethostname()}-{os.getpid()}"

    def _consumer_specs(self) -> list[ConsumerSpec]:
        from arcflow.common.service.subscribers import effective_consumer

        return [effective_consumer(s, self.settings) for s in self.spec.subscriptions]

    async def start(self) -> None:
        """Bring the service up; on any failure, undo what was started and raise."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        spec, settings = self.spec, self.settings
        meter = self._meter
        if self._serve_metrics and spec.runtime_servers:
            from arcflow.common.telemetry.metrics import setup_metrics

            self._metrics = setup_metrics(
                spec.name, host=settings.metrics_host, port=settings.metrics_port
            )
            meter = self._metrics.meter
        nats_settings = self._nats_settings or getattr(settings, "nats", None)
        if nats_settings is None:
            from arcflow.common.nats.settings import NatsSettings

            nats_settings = NatsSettings()
        if not nats_settings.name:
            nats_settings = nats_settings.model_copy(update={"name": f"arcflow-{spec.name}"})
        try:
            # nats-py retries an unreachable server forever at start-up; a deadline turns that
            # into exit code 3 so the orchestrator sees a failed start.
            async with asyncio.timeout(STARTUP_CONNECT_SECONDS):
                nc = await self._connect(nats_settings)
        except Exception as exc:
            raise DependencyUnavailableError(
                f"cannot connect to NATS at {nats_settings.url}: {type(exc).__name__}"
            ) from exc
        if meter is None:  # no metrics server: the OpenTelemetry API's no-op/global meter
            from opentelemetry.metrics import get_meter

            meter = get_meter(f"arcflow.{spec.name}")
        js = nc.jetstream()
        await self._declare_layout(js)
        kube = self._given_kube
        if kube is None and spec.kube_settings is not None:
            from arcflow.common.kube import KubeClient

            try:
                kube = self._kube = await KubeClient.from_settings(spec.kube_settings(settings))
            except Exception as exc:
                raise DependencyUnavailableError(
                    f"cannot configure the Kubernetes client: {type(exc).__name__}: {exc}"
                ) from exc
        self.context = ServiceContext(
            name=spec.name,
            settings=settings,
            nc=nc,
            js=js,
            meter=meter,
            instance=self._instance(),
            kube=kube,
            overrides=self._overrides,
            fatal=self.fatal,
            rpc=spec.rpc,
            controllers=spec.controllers,
        )
        self.state = await spec.build(self.context)
        components = spec.components(self.context, self.state) if spec.components else ()
        for component in components:
            await component.start()
            self.components.append(component)
        if self._serve_health and spec.runtime_servers:
            await self._start_health()
        await self._start_subscribers(nats_settings.inbox_prefix_for(spec.name))
        if self._run_periodic:
            self._periodic = [self._start_periodic(task) for task in spec.periodic]
        self.started = True
        log.info(
            "%s started",
            spec.name,
            extra={
                "service": spec.name,
                "instance": self.context.instance,
                "health_port": self.health_port,
                "metrics_port": self._metrics.port if self._metrics else None,
                "subscriptions": [s.consumer.durable for s in spec.subscriptions],
            },
        )

    async def _connect(self, nats_settings: Any) -> NatsClient:
        """The service's one connection: a FastStream broker's when it subscribes, else plain
        nats-py (same identity, inbox prefix and state logs; FastStream is not imported)."""
        if not self.spec.subscriptions:
            self._plain = await connect_plain(
                nats_settings,
                self.spec.name,
                on_error=self._on_nats_error,
                closing=lambda: self._closing,
            )
            return self._plain
        self.broker = make_service_broker(
            nats_settings,
            self.spec.name,
            on_error=self._on_nats_error,
            closing=lambda: self._closing,
        )
        return await self.broker.connect()

    async def _declare_layout(self, js: JetStreamContext) -> None:
        """The whole JetStream layout, or only the streams the spec names (a NATS user that
        may declare no more), then the subscriptions' consumers and the spec's buckets."""
        if self.spec.streams is None:
            await ensure_jetstream(js, consumers=self._consumer_specs())
        else:
            for stream in self.spec.streams:
                await ensure_stream(js, stream)
            for consumer in self._consumer_specs():
                await ensure_consumer(js, consumer)
        for bucket in self.spec.buckets:
            await ensure_bucket(js, bucket)

    async def _start_health(self) -> None:
        from arcflow.common.health import HealthServer

        self._health = HealthServer(
            self.settings.health_host,
            self.settings.health_port,
            live=lambda: self.healthy,
            ready=lambda: self.ready,
            details=self._details,
            profiling=bool(getattr(self.settings, "profiling", False)),
        )
        self.health_port = await self._health.start()

    def _details(self) -> dict[str, Any]:
        """The ``/readyz`` body: NATS state plus what each component reports (``details()``)."""
        found: dict[str, Any] = {"nats": bool(self.context and self.context.nc.is_connected)}
        for component in self.components:
            details = getattr(component, "details", None)
            if callable(details):
                found.update(details())
        return found

    async def _start_subscribers(self, inbox_prefix: str) -> None:
        if not self.spec.subscriptions:
            return
        from arcflow.common.service.subscribers import attach_subscription

        assert self.broker is not None
        assert self.context is not None
        fetch_timeout = self._fetch_timeout or float(
            getattr(self.settings, "fetch_timeout_seconds", 1.0)
        )
        self._subscribers = [
            attach_subscription(
                self.broker,
                subscription,
                self.state,
                self.settings,
                service=self.spec.name,
                inbox_prefix=inbox_prefix,
                dead_letter_target=self.context.js,
                fetch_timeout=fetch_timeout,
            )
            for subscription in self.spec.subscriptions
        ]
        await self.broker.start()

    def _start_periodic(self, task: PeriodicTask) -> asyncio.Task[None]:
        interval = float(task.interval(self.settings))

        async def loop() -> None:
            if interval <= 0:
                await asyncio.Event().wait()  # disabled: idle until stopped
            while True:
                await asyncio.sleep(interval)
                try:
                    await task.run(self.state)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning(
                        "%s failed: %s",
                        task.name,
                        type(exc).__name__,
                        extra={"service": self.spec.name, "task": task.name},
                    )

        return asyncio.create_task(loop(), name=f"{self.spec.name} {task.name}")

    # --- stop -----------------------------------------------------------------------------

    async def stop_subscribers(self) -> None:
        """Stop consuming (the service stays up, not ready); part of :meth:`stop`."""
        for subscriber in reversed(self._subscribers):
            with contextlib.suppress(Exception):
                await subscriber.stop()

    async def stop(self) -> None:
        """Stop everything that was started, in reverse order; safe to call twice."""
        self.started = False
        self._closing = True
        await cancel_and_wait(self._periodic)
        self._periodic = []
        await self.stop_subscribers()
        self._subscribers = []
        if self._health is not None:
            await self._health.stop()
            self._health = None
        while self.components:
            component = self.components.pop()
            try:
                await component.stop()
            except Exception as exc:
                log.warning(
                    "component did not stop cleanly: %s",
                    type(exc).__name__,
                    extra={"service": self.spec.name, "component": type(component).__name__},
                )
        if self._kube is not None:
            await self._kube.close()
            self._kube = None
        if self.broker is not None:
            with contextlib.suppress(Exception):
                await self.broker.stop()
            self.broker = None
        if self._plain is not None:
            with contextlib.suppress(Exception):
                await self._plain.drain()  # refused while reconnecting: then closed below
            if not self._plain.is_closed:
                with contextlib.suppress(Exception):
                    await self._plain.close()
            self._plain = None
        if self._metrics is not None:
            self._metrics.stop()
            self._metrics = None

    async def run(self, stop: asyncio.Event) -> None:
        """Start, run until ``stop`` is set or the service fails, then stop.

        Raises the failure (a dead background loop) after stopping.
        """
        await self.start()
        try:
            waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(self._failed.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(waiters)
        finally:
            await self.stop()
            log.info("%s stopped", self.spec.name, extra={"service": self.spec.name})
        if self.failure is not None:
            raise ServiceFailedError(str(self.failure)) from self.failure


class ServiceFailedError(RuntimeError):
    """A part of the service that must run forever stopped (see the cause)."""
