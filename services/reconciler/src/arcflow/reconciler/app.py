"""Wiring: NATS consumers -> work queue -> controllers; periodic resync; metrics.

:class:`ReconcilerApp` takes its connections from the caller (tests pass a nats-py connection
to a real nats-server and a KubeClient on the emulator); :func:`run` builds them from the
environment for ``python -m arcflow.reconciler``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import nats
import nats.errors
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from opentelemetry.metrics import Meter

from arcflow.common.events import EventBase, K8sObjectChanged, ScaleSetAssigned, ScaleSetDeleted
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    ConflictError,
    KubeClient,
    KubeSettings,
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
from arcflow.common.telemetry import setup_logging, setup_metrics
from arcflow.reconciler.audit import Writer
from arcflow.reconciler.controllers.ars import reconcile_ars
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.listener import reconcile_listener
from arcflow.reconciler.controllers.runner import reconcile_runner
from arcflow.reconciler.controllers.runner_set import reconcile_runner_set
from arcflow.reconciler.metrics import ReconcilerMetrics
from arcflow.reconciler.routing import keys_for
from arcflow.reconciler.scalesets import ScaleSetIds
from arcflow.reconciler.settings import ReconcilerSettings
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
    ) -> None:
        self.settings = settings or ReconcilerSettings()
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
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.running = False

    async def _reconcile(self, key: Key) -> Result:
        attrs = {"kind": key.kind}
        started = time.perf_counter()
        self.metrics.reconciles.add(1, attrs)
        try:
            return await _CONTROLLERS[key.kind](self.context, key)
        except ConflictError:
            return Result.again(CONFLICT_RETRY_SECONDS)  # stale read: re-read and retry
        except Exception:
            self.metrics.errors.add(1, attrs)
            raise
        finally:
            self.metrics.duration.record(time.perf_counter() - started, attrs)

    async def _on_event(self, event: EventBase, _delivery: Delivery) -> None:
        for key in keys_for(event, self.settings.controller_namespace):
            self.queue.add(key)

    async def start(self) -> None:
        specs = [CONSUMER_RECONCILER_K8S, CONSUMER_RECONCILER_SCALESETS]
        await ensure_jetstream(self.js)
        self.context.ids = ScaleSetIds(await self.js.key_value(KV_SCALESETS.bucket))
        self.queue.start()
        for spec in specs:
            self._tasks.append(asyncio.create_task(self._consume(spec), name=spec.durable))
        self._tasks.append(asyncio.create_task(self._resync_forever(), name="resync"))
        self.running = True
        await self.resync()

    async def resync(self) -> None:
        """Enqueue every object of the four kinds (catches anything an event missed)."""
        for resource, kind in (
            (AUTOSCALING_RUNNER_SET, "ars"),
            (AUTOSCALING_LISTENER, "al"),
            (EPHEMERAL_RUNNER_SET, "ers"),
            (EPHEMERAL_RUNNER, "er"),
        ):
            listed = await self.kube.list(resource)
            for obj in listed.items:
                metadata = obj.get("metadata") or {}
                self.queue.add(Key(kind, metadata.get("namespace", ""), metadata.get("name", "")))  # type: ignore[arg-type]

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
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.queue.stop()


async def run(
    settings: ReconcilerSettings | None = None, *, stop_event: asyncio.Event | None = None
) -> None:
    settings = settings or ReconcilerSettings()
    setup_logging("reconciler", json_output=settings.log_json, level=settings.log_level)
    metrics_server = setup_metrics(
        "reconciler", host=settings.metrics_host, port=settings.metrics_port
    )
    nc = await nats.connect(
        **NatsSettings(name=settings.instance or "reconciler").connect_options()
    )
    kube = await KubeClient.from_settings(KubeSettings())
    app = ReconcilerApp(nc, kube, settings, meter=metrics_server.meter)
    try:
        await app.start()
        await (stop_event or asyncio.Event()).wait()
    finally:
        await app.stop()
        await kube.close()
        await nc.drain()
        metrics_server.stop()
