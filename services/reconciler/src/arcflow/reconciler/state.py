"""The reconciler's state: its controllers run by the controller runtime (ADR 0095), the
trace context each key continues, and the periodic resync. Built by the service runtime once
NATS and Kubernetes exist.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence

from nats.js.kv import KeyValue
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import TracerProvider

from arcflow.common.events import EventBase
from arcflow.common.kube import (
    ConflictError,
)
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import KV_SCALESETS
from arcflow.common.reconcile.manager import Manager
from arcflow.common.rpc.registrar import RegistrarRpcClient
from arcflow.common.service import Component, Part, ServiceContext
from arcflow.common.telemetry import extract_trace_context
from arcflow.common.telemetry.tracing import trace_headers_of
from arcflow.reconciler.audit import Writer
from arcflow.reconciler.cache import cached_kinds
from arcflow.reconciler.controllers.base import Context, StatusPacer, Tuning
from arcflow.reconciler.controllers.orphan_rules import Suspects
from arcflow.reconciler.controllers.orphans import scan_orphans
from arcflow.reconciler.controllers.reaper_rules import Deadlines, parse_deadlines
from arcflow.reconciler.controllers.runner_removals import RunnerRemovals
from arcflow.reconciler.keys import Key, Result
from arcflow.reconciler.listener_sessions import ListenerSessions
from arcflow.reconciler.metrics import ReconcilerMetrics
from arcflow.reconciler.scalesets import ScaleSetIds
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.reconciler.stages import StageClock

log = logging.getLogger(__name__)

CONFLICT_RETRY_SECONDS = 0.05
TUNING_FIELDS = frozenset(f.name for f in dataclasses.fields(Tuning))


class ReconcilerState:
    """One reconciler replica's controllers (the runtime built from ``declared.py``: cache,
    routing, work queue, adapters, ADR 0095), the trace context each key continues, and the
    periodic resync."""

    def __init__(
        self,
        ctx: ServiceContext,
        *,
        records: KeyValue | None = None,
        listener_sessions: ListenerSessions | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        settings: ReconcilerSettings = ctx.settings
        self.settings = settings
        self.tracer = trace.get_tracer("arcflow.reconciler", tracer_provider=tracer_provider)
        # key -> the trace context of the newest event that enqueued it (consumed by the run)
        self._trace_parents: dict[Key, otel_context.Context] = {}
        self.kube = ctx.require_kube()
        self.metrics = ReconcilerMetrics(ctx.meter)
        #: The registrar's scale set records, from a live watch of its bucket (ADR 0122).
        self.ids = (
            ScaleSetIds(records, self.metrics.scaleset_reads, connection=ctx.nc)
            if records
            else None
        )
        ids = self.ids
        stages = StageClock(record=self.metrics.record_stage)

        def make_context(manager: Manager[Context]) -> Context:
            # The controllers' context, built once and complete (ADR 0071); a test passes
            # other values for its fields, or its tuning's (e.g. job_running_recheck, clock),
            # as ``overrides["context"]``.
            overrides = ctx.overrides.get("context", {})
            context = Context(
                kube=self.kube,
                writer=Writer(self.kube, ctx.js, self.metrics, cache=manager.cache),
                build=settings.build_settings(),
                ids=ids,
                listener_sessions=listener_sessions,
                registrar=RegistrarRpcClient(ctx.nc, timeout=settings.rpc_timeout_seconds),
                metrics=self.metrics,
                instance=settings.instance or f"{ctx.instance}-{secrets.token_hex(3)}",
                cache=manager.cache,
                tuning=dataclasses.replace(
                    Tuning(
                        outdated_backoff_base=settings.outdated_backoff_base_seconds,
                        outdated_backoff_cap=settings.outdated_backoff_cap_seconds,
                        create_concurrency=settings.create_concurrency,
                        pending_status_delay=settings.pending_status_delay_seconds,
                        deadlines=parse_deadlines(settings.runner_deadlines, Deadlines()),
                        job_completed_grace=settings.job_completed_grace_seconds,
                    ),
                    **{k: v for k, v in overrides.items() if k in TUNING_FIELDS},
                ),
                states=manager.states,
                kept=manager.kept,
            )
            return dataclasses.replace(
                context, **{k: v for k, v in overrides.items() if k not in TUNING_FIELDS}
            )

        self.manager: Manager[Context] = Manager(
            ctx.require_controllers(),
            make_context,
            kube=self.kube,
            # --- watch-fed cache (ADR 0010): reads from memory, writes seen at once ---
            cached=cached_kinds(settings.namespaces, settings.controller_namespace),
            home_namespace=settings.controller_namespace,
            run=self._run,
            states={
                StageClock: stages,
                StatusPacer: StatusPacer(interval=settings.status_interval_seconds),
                # A removal's end re-queues its runner (ADR 0101); the queue is the manager's.
                RunnerRemovals: RunnerRemovals(
                    concurrency=settings.removal_concurrency,
                    requeue=lambda key: self.queue.add(key),
                ),
            },
            on_object=stages.observe_object,
            relist_seconds=settings.cache_relist_seconds,
            workers=settings.workers,
            caps=settings.worker_caps,
            retry_base_seconds=settings.retry_base_seconds,
            retry_cap_seconds=settings.retry_cap_seconds,
        )
        self.queue = self.manager.queue
        self.cache = self.manager.cache
        self.context = self.manager.context
        self.orphan_suspects = Suspects.empty(settings.orphan_grace_seconds)
        self.resynced = False

    async def _run(
        self, context: Context, key: Key, call: Callable[[Context], Awaitable[Result]]
    ) -> Result:
        """One pass: its span (a child of the event that asked for the key), its metrics, and
        a stale read's conflict retried at once."""
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
                return await call(context)
            except ConflictError:
                span.set_attribute("arcflow.conflict", True)
                return Result.again(CONFLICT_RETRY_SECONDS)  # stale read: re-read and retry
            except Exception:
                self.metrics.errors.add(1, attrs)
                raise
            finally:
                self.metrics.duration.record(time.perf_counter() - started, attrs)

    async def on_event(self, event: EventBase, delivery: Delivery) -> None:
        """Enqueue the ARS a registrar or listener event asks for, continuing its trace
        (Kubernetes changes come from the cache's ``on_change``, ``cache.py``)."""
        parent = extract_trace_context(delivery.headers or trace_headers_of(event.trace))
        has_trace = trace.get_current_span(parent).get_span_context().is_valid
        for key in self.manager.keys_for_event(event):
            if self.ids is not None and key.kind == "ars":
                # the event may announce a write the records watch has not delivered yet
                self.ids.refresh(key.namespace, key.name)
            if has_trace:
                self._trace_parents[key] = parent
            self.queue.add(key)

    async def resync(self) -> None:
        """Enqueue every cached object of the four kinds (no API call; the cache's own
        periodic relist guards against drift)."""
        self.manager.resync()

    async def scan_orphans(self) -> None:
        """GitHub runners with no EphemeralRunner, EphemeralRunners with no GitHub runner
        (ADR 0065, controllers/orphans.py)."""
        removed = await scan_orphans(self.context, self.orphan_suspects)
        self.metrics.orphan_scans.add(1)
        if any(removed.values()):
            log.info("orphan scan: %s (GitHub runners handed to the removal pool)", removed)

    async def first_resync(self) -> None:
        """The resync at start-up: readiness waits for it."""
        await self.resync()
        self.resynced = True


async def build(ctx: ServiceContext) -> ReconcilerState:
    return ReconcilerState(
        ctx,
        records=await ctx.js.key_value(KV_SCALESETS.bucket),
        listener_sessions=ListenerSessions(ctx.js),
        tracer_provider=ctx.overrides.get("tracer_provider"),
    )


def components(ctx: ServiceContext, state: ReconcilerState) -> Sequence[Component]:
    """The scale set records' watch, the cache, the work queue, then the first resync (all
    before the subscribers)."""
    records = (
        [Part("scaleset-records", on_start=state.ids.start, on_stop=state.ids.stop)]
        if state.ids is not None
        else []
    )
    return [
        *records,
        Part(
            "cache",
            on_start=state.manager.start_cache,
            on_stop=state.manager.stop_cache,
            is_healthy=lambda: state.manager.cache_alive,
        ),
        Part("workqueue", on_start=_start_queue(state), on_stop=_drain_queue(state)),
        Part("first-resync", on_start=state.first_resync),
    ]


def _drain_queue(state: ReconcilerState) -> Callable[[], Awaitable[None]]:
    """Stop the queue, letting passes in flight finish within ``drain_seconds`` (issue 33):
    the subscribers are stopped already, the cache, the Kubernetes client and NATS not yet."""

    async def stop() -> None:
        await state.queue.stop(drain_seconds=state.settings.drain_seconds)
        await state.context.state(RunnerRemovals).stop()

    return stop


def _start_queue(state: ReconcilerState) -> Callable[[], Awaitable[None]]:
    async def start() -> None:
        state.queue.start()

    return start


async def resync(state: ReconcilerState) -> None:
    await state.resync()


async def orphan_scan(state: ReconcilerState) -> None:
    await state.scan_orphans()
