"""The registrar's state, built once its connections exist: the converge executor, the
Actions client cache, the lease locks and the RPC server (a component)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.retry import RetryPolicy
from arcflow.common.nats.jetstream import KV_SCALESETS
from arcflow.common.service import Component, Part, ServiceContext
from arcflow.registrar.converge import Registrar
from arcflow.registrar.credentials import ActionsClientCache, ClientFactory, Credentials
from arcflow.registrar.locks import LOCKS_BUCKET, LeaseLocks
from arcflow.registrar.lookup import JitLookup
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.rpc_server import RegistrarRpcServer
from arcflow.registrar.settings import RegistrarSettings


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
    registrar: Registrar
    clients: ActionsClientCache
    rpc: RegistrarRpcServer
    lookup: JitLookup
    instance: str
    #: Change events that led to a converge (tests and benchmarks read it).
    handled: int = 0


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
    registrar = Registrar(
        kube=ctx.require_kube(),
        js=ctx.js,
        records=await ctx.js.key_value(KV_SCALESETS.bucket),
        locks=locks,
        clients=clients,
        metrics=metrics,
        namespaces=settings.namespaces,
    )
    registrar.verify_interval = settings.verify_interval_seconds
    # JIT requests answered from memory (ADR 0010); converges read the same ARS cache (0031)
    lookup = JitLookup(
        ctx.require_kube(), registrar.records, clients, namespaces=settings.namespaces
    )
    registrar.ars_cache = lookup.ars
    rpc = RegistrarRpcServer(ctx.nc, registrar, concurrency=settings.rpc_concurrency, lookup=lookup)
    return RegistrarState(
        registrar=registrar, clients=clients, rpc=rpc, lookup=lookup, instance=ctx.instance
    )


def components(ctx: ServiceContext, state: RegistrarState) -> Sequence[Component]:
    """The Actions clients (closed last), the JIT lookup, then the RPC server."""
    return [
        Part("actions-clients", on_stop=state.clients.aclose),
        Part("jit-lookup", on_start=state.lookup.start, on_stop=state.lookup.stop),
        Part("rpc", on_start=state.rpc.start, on_stop=state.rpc.stop),
    ]


async def sweep(state: RegistrarState) -> None:
    await state.registrar.sweep()
