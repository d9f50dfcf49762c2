"""The registrar's state, built once its connections exist: the converge controller's context
and its work queue, the Actions client cache, the lease locks, the JIT lookup and the RPC
server (components)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from opentelemetry import context as otel_context
from opentelemetry import trace

from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.retry import RetryPolicy
from arcflow.common.nats.jetstream import KV_SCALESETS
from arcflow.common.reconcile.manager import Manager
from arcflow.common.reconcile.workqueue import WorkQueue
from arcflow.common.service import Component, Part, ServiceContext
from arcflow.registrar.context import ArsKey, RegistrarContext, build_context
from arcflow.registrar.controller import run_pass
from arcflow.registrar.credentials import ActionsClientCache, ClientFactory, Credentials
from arcflow.registrar.hints import PassHints
from arcflow.registrar.locks import LOCKS_BUCKET, LeaseLocks
from arcflow.registrar.lookup import JitLookup
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.rpc_server import RegistrarRpcServer
from arcflow.registrar.settings import RegistrarSettings
from arcflow.registrar.sweep import sweep as sweep_once


def default_client_factory(settings: RegistrarSettings) -> ClientFactory:
    retry = RetryPolicy(
        max_retries=settings.actions_max_retries,
        backoff_max=settings.actions_retry_wait_max_seconds,
    )

    def build(
        config_url: str, credentials: Credentials, connection: ServerConnection
    ) -> ActionsClient:
        return ActionsClient(config_url, credentials, retry=retry, connection=connection)

    return build


@dataclass
class RegistrarState:
    manager: Manager[RegistrarContext]
    clients: ActionsClientCache
    rpc: RegistrarRpcServer
    lookup: JitLookup
    instance: str
    #: Change events that asked for a pass (tests and benchmarks read it).
    events: int = field(default=0)

    @property
    def context(self) -> RegistrarContext:
        return self.manager.context

    @property
    def queue(self) -> WorkQueue[ArsKey]:
        return self.manager.queue

    def enqueue(self, namespace: str, name: str, *, trigger: str, seen_version: str = "") -> None:
        """What a change event does: ask for a pass of its ARS, which continues the event's
        trace (the handler runs in the consumer span of the message)."""
        self.events += 1
        current = otel_context.get_current()
        traced = trace.get_current_span(current).get_span_context().is_valid
        self.context.enqueue(
            namespace,
            name,
            trigger=trigger,
            seen_version=seen_version,
            parent=current if traced else None,
        )

    @property
    def handled(self) -> int:
        """Converge passes that finished (tests and benchmarks read it)."""
        return self.queue.processed


async def build(ctx: ServiceContext) -> RegistrarState:
    settings: RegistrarSettings = ctx.settings
    factory = ctx.overrides.get("client_factory") or default_client_factory(settings)
    clients = ActionsClientCache(factory, max_size=settings.client_cache_size)
    metrics = RegistrarMetrics(ctx.meter)
    locks = LeaseLocks(
        await ctx.js.key_value(LOCKS_BUCKET.bucket),
        ctx.instance,
        ttl_seconds=settings.lock_ttl_seconds,
        wait_seconds=settings.lock_wait_seconds,
    )
    records = await ctx.js.key_value(KV_SCALESETS.bucket)
    # JIT requests answered from memory (ADR 0010); passes read the same ARS cache (0031)
    lookup = JitLookup(
        ctx.require_kube(), records, clients, namespaces=settings.namespaces, connection=ctx.nc
    )
    provider = ctx.overrides.get("tracer_provider")

    def make_context(manager: Manager[RegistrarContext]) -> RegistrarContext:
        return build_context(
            kube=ctx.require_kube(),
            js=ctx.js,
            records=records,
            locks=locks,
            clients=clients,
            queue=manager.queue,
            hints=manager.state(PassHints),
            metrics=metrics,
            namespaces=settings.namespaces,
            ars_cache=lookup.ars,
            verify_interval=settings.verify_interval_seconds,
            recheck_seconds=settings.resync_interval_seconds,
            tracer=trace.get_tracer("arcflow.registrar", tracer_provider=provider),
        )

    # One pass per ARS at a time, 16 ARSs at once, each within its deadline (ADR 0072); its
    # trigger is the watcher's stream (the subscriptions), never a cache (ADR 0069).
    manager: Manager[RegistrarContext] = Manager(
        ctx.require_controllers(),
        make_context,
        run=run_pass,
        workers=settings.converge_concurrency,
        retry_base_seconds=settings.retry_delay_seconds,
        retry_cap_seconds=settings.retry_delay_cap_seconds,
        deadline_seconds=settings.converge_deadline_seconds,
        name="converge",
    )
    rpc = RegistrarRpcServer(
        ctx.nc, manager.context, ctx.rpc, concurrency=settings.rpc_concurrency, lookup=lookup
    )
    return RegistrarState(
        manager=manager, clients=clients, rpc=rpc, lookup=lookup, instance=ctx.instance
    )


async def _start_queue(queue: WorkQueue[ArsKey]) -> None:
    queue.start()


def components(ctx: ServiceContext, state: RegistrarState) -> Sequence[Component]:
    """The Actions clients (closed last), the JIT lookup, the converge queue, then the RPC
    server."""
    return [
        Part("actions-clients", on_stop=state.clients.aclose),
        Part("jit-lookup", on_start=state.lookup.start, on_stop=state.lookup.stop),
        Part(
            "converge-queue", on_start=partial(_start_queue, state.queue), on_stop=state.queue.stop
        ),
        Part("rpc", on_start=state.rpc.start, on_stop=state.rpc.stop),
    ]


async def sweep(state: RegistrarState) -> None:
    await sweep_once(state.context, state.lookup.live_records())
