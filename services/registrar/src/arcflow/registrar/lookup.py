"""What a JIT-config request needs, answered from memory (ADR 0010).

Per request the registrar used to GET the ARS, GET the credentials Secret and build two
throwaway KV watchers for the scale set records. :class:`JitLookup` keeps instead:

* every AutoscalingRunnerSet, from one watch (``arcflow.common.cache``), or one per managed
  namespace when ``namespaces`` is set (a namespace-scoped install: nothing cluster-wide);
* each credentials Secret an ARS names, from one watch per Secret (a field selector on its
  name), started the first time a request needs it; its data stays in this process's memory
  only, never in a stream, bucket, log or event; the same for the CA ConfigMap
  (``githubServerTLS``) and the proxy credential Secrets (``proxy``) an ARS names;
* the scale set records, from **one** live watch of the ``arcflow_scalesets`` KV bucket
  (:class:`~arcflow.common.nats.kv_mirror.KvMirror`).

Requests are served concurrently by the RPC server; nothing here blocks another request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from nats.aio.client import Client as NatsClient
from nats.js.kv import KeyValue

from arcflow.common.actions.client import ActionsClient
from arcflow.common.cache import CachedKind, Informer, KindStore, ObjectCache
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, SECRET, KubeClient, Resource
from arcflow.common.nats.kv_mirror import KvMirror
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.registrar.connection import Manifest, read_server_connection
from arcflow.registrar.credentials import (
    ActionsClientCache,
    CredentialsUnavailableError,
    decode_secret_data,
)
from arcflow.registrar.planning import ars_of, github_config_of

log = logging.getLogger(__name__)

_SYNC_SECONDS = 10.0


def ars_cached_kind(namespaces: Sequence[str] = ()) -> CachedKind:
    """The registrar's ARS cache: cluster-wide, or a list+watch per managed namespace."""
    return CachedKind(AUTOSCALING_RUNNER_SET, namespaces=tuple(sorted(set(namespaces))))


class JitLookup:
    """``await start()``; then :meth:`client_for_ars` and :meth:`records_of` from memory."""

    def __init__(
        self,
        kube: KubeClient,
        records: KeyValue,
        clients: ActionsClientCache,
        *,
        namespaces: Sequence[str] = (),
        connection: NatsClient | None = None,
    ) -> None:
        self.kube = kube
        self.clients = clients
        #: The managed namespaces (empty: all); a request for a set elsewhere is refused here.
        self.namespaces = tuple(sorted(set(namespaces)))
        self.ars = ObjectCache(kube, [ars_cached_kind(self.namespaces)])
        self._secrets: dict[tuple[str, str, str], Informer] = {}
        self._secret_locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._records = KvMirror(
            records, ScaleSetRecord.decode, what="scale set record", connection=connection
        )
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start the watches; requests wait for their first snapshot (:meth:`synced`), so an
        API server that is down at start delays answers instead of failing the service."""
        self._tasks.extend(self.ars.start())
        await self._records.start()

    async def synced(self) -> None:
        """Until the ARS list and the records are in memory (``TimeoutError`` after 10 s)."""
        await asyncio.wait_for(self.ars.synced(), _SYNC_SECONDS)
        await asyncio.wait_for(self._records.synced(), _SYNC_SECONDS)

    async def stop(self) -> None:
        await self.ars.stop()
        for informer in self._secrets.values():
            await informer.stop()
        await self._records.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def records_of(self, namespace: str, ars: str) -> list[ScaleSetRecord]:
        return [r for r in self._records.values() if r.namespace == namespace and r.ars == ars]

    def live_records(self) -> dict[tuple[str, str], dict[str, ScaleSetRecord]] | None:
        """Every registration by (namespace, ARS) and variant, as the live watch has them;
        ``None`` unless that watch is running and has replayed the bucket (its view is then
        at most one delivery behind the bucket)."""
        if not self._records.live:
            return None
        found: dict[tuple[str, str], dict[str, ScaleSetRecord]] = {}
        for record in self._records.values():
            found.setdefault((record.namespace, record.ars), {})[record.variant] = record
        return found

    # --- credentials: one watch per Secret named by an ARS ------------------------------

    async def _secret_data(self, namespace: str, name: str) -> dict[str, bytes]:
        where = f"{namespace}/{name}"
        if not name:
            raise CredentialsUnavailableError("spec.githubConfigSecret is empty")
        secret = await self._watched(SECRET, namespace, name)
        if secret is None:
            raise CredentialsUnavailableError(f"secret {where} not found")
        return decode_secret_data(secret, where)

    async def _watched(self, resource: Resource, namespace: str, name: str) -> Manifest | None:
        """One object from a watch of it alone (a ``metadata.name`` field selector), started
        on first use: credentials Secrets, the CA ConfigMap and proxy credential Secrets."""
        key = (resource.kind, namespace, name)
        informer = self._secrets.get(key)
        if informer is None:
            lock = self._secret_locks.setdefault(key, asyncio.Lock())
            async with lock:
                informer = self._secrets.get(key)
                if informer is None:
                    informer = Informer(
                        self.kube,
                        resource,
                        KindStore(resource.kind),
                        namespace=namespace,
                        field_selector=f"metadata.name={name}",
                    )
                    informer.start()
                    self._secrets[key] = informer
        await asyncio.wait_for(informer.synced(), _SYNC_SECONDS)
        return informer.store.get(namespace, name)

    # --- the answer -------------------------------------------------------------------------

    async def client_for_ars(self, namespace: str, name: str) -> tuple[ActionsClient, int]:
        """As ``Registrar.client_for_ars``, from memory: the ARS's spec (or, once it is gone,
        a registration's), its cached credentials, and the registration count."""
        if self.namespaces and namespace not in self.namespaces:
            raise LookupError(
                f"AutoscalingRunnerSet {namespace}/{name} is outside the managed namespaces"
            )
        await self.synced()
        doc = self.ars.get(AUTOSCALING_RUNNER_SET, name, namespace)
        records = self.records_of(namespace, name)
        spec, url, secret = github_config_of(ars_of(doc, namespace, name), records, namespace, name)
        data = await self._secret_data(namespace, secret)
        connection = await read_server_connection(self._watched, namespace, spec)
        client = await self.clients.client_for(url, data, f"{namespace}/{secret}", connection)
        return client, len(records)
