"""A watch-fed read cache over several kinds, with read-your-writes.

Reads (``get``/``list``) come from memory. Writes still go to the API server, and their
results come back in through :meth:`ObjectCache.observe_write` /
:meth:`ObjectCache.observe_delete` at once, so a reconcile that runs right after its own
create sees the object (it never creates twice) and one that runs after its own delete does
not see it again, whatever the watch's lag. The store's resourceVersion check keeps the late
watch echo of an older version from undoing that. These are the "expectations" of the
upstream ReplicaSet controller in their simplest form: the write's result is the expectation.

A kind is *authoritative* when every object of interest is watched (an absent object does not
exist). Other lookups (a Secret a user created without our labels) go to the API server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.cache.informer import Informer, OnChange
from arcflow.common.cache.store import Change, KindStore, Manifest
from arcflow.common.kube import KubeClient, NotFoundError, Resource
from arcflow.common.kube.client import LabelSelector
from arcflow.common.kube.selectors import parse_label_selector

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachedKind:
    """One kind to cache, optionally restricted by a label selector: cluster-wide (one
    list+watch), or with ``namespaces`` one list+watch per namespace, all into one store
    (an identity with Roles in those namespaces only can list nothing cluster-wide)."""

    resource: Resource
    label_selector: LabelSelector = None
    namespaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.namespaces and not self.resource.namespaced:
            raise ValueError(f"{self.resource.kind} is cluster-scoped: it has no namespaces")
        if len(set(self.namespaces)) != len(self.namespaces) or "" in self.namespaces:
            raise ValueError(f"{self.resource.kind}: namespaces must be distinct and non-empty")


class ObjectCache:
    """``start()``, ``await synced()``, then read; feed it the results of your writes."""

    def __init__(
        self,
        kube: KubeClient,
        kinds: Iterable[CachedKind],
        *,
        on_change: OnChange | None = None,
        relist_seconds: float = 900.0,
        delay_seconds: float = 0.0,
    ) -> None:
        self.kube = kube
        self.on_change = on_change
        self.stores: dict[str, KindStore] = {}
        #: The list+watches, by kind (cluster-wide) or by ``kind/namespace`` (per namespace).
        self.informers: dict[str, Informer] = {}
        for kind in kinds:
            if kind.resource.kind in self.stores:
                raise ValueError(f"{kind.resource.kind} is cached twice")
            store = KindStore(kind.resource.kind)
            self.stores[kind.resource.kind] = store
            scopes: tuple[str | None, ...] = kind.namespaces or (None,)
            for namespace in scopes:
                key = (
                    kind.resource.kind if namespace is None else f"{kind.resource.kind}/{namespace}"
                )
                self.informers[key] = Informer(
                    kube,
                    kind.resource,
                    store,
                    namespace=namespace,
                    label_selector=kind.label_selector,
                    on_change=self._changed,
                    relist_seconds=relist_seconds,
                    delay_seconds=delay_seconds,
                )
        self.live_reads = 0

    def _changed(self, change: Change) -> None:
        if self.on_change is not None:
            self.on_change(change)

    def caches(self, resource: Resource | str) -> bool:
        return _kind(resource) in self.stores

    def informers_of(self, resource: Resource | str) -> list[Informer]:
        """The list+watches that fill ``resource``'s store: one, or one per namespace."""
        kind = _kind(resource)
        return [i for key, i in self.informers.items() if key.split("/", 1)[0] == kind]

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> list[asyncio.Task[None]]:
        return [informer.start() for informer in self.informers.values()]

    async def synced(self) -> None:
        await asyncio.gather(*(i.synced() for i in self.informers.values()))

    @property
    def is_synced(self) -> bool:
        return all(i.is_synced for i in self.informers.values())

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers.values()))

    async def relist(self) -> None:
        """List every kind again now (the drift guard, also on demand)."""
        await asyncio.gather(*(i.relist() for i in self.informers.values()))

    # --- reads ------------------------------------------------------------------------

    def get(
        self, resource: Resource | str, name: str, namespace: str = "", *, shared: bool = False
    ) -> Manifest | None:
        """A copy of the cached object; ``shared=True``: the cached object itself, for a
        caller that never changes it (the reconciler's typed reads, ADR 0050)."""
        return self._store(resource).get(namespace, name, shared=shared)

    def list(
        self,
        resource: Resource | str,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector = None,
        owner_uid: str | None = None,
        shared: bool = False,
    ) -> list[Manifest]:
        """Copies of the matching objects; ``shared=True``: the cached objects themselves,
        for a caller that never changes them (see :meth:`KindStore.list`)."""
        store = self._store(resource)
        if isinstance(label_selector, Mapping):
            return store.list(namespace, labels=label_selector, owner_uid=owner_uid, shared=shared)
        return store.list(
            namespace,
            selector=parse_label_selector(label_selector),
            owner_uid=owner_uid,
            shared=shared,
        )

    async def get_or_read(
        self, resource: Resource | str, name: str, namespace: str = ""
    ) -> Manifest | None:
        """From memory when cached there, else one GET (for objects the watch may not see)."""
        if self.caches(resource):
            found = self.get(resource, name, namespace)
            if found is not None:
                return found
        self.live_reads += 1
        try:
            return await self.kube.get(resource, name, namespace or None)
        except NotFoundError:
            return None

    async def refresh(self, resource: Resource | str, name: str, namespace: str = "") -> None:
        """Read one object from the API server into the cache (after a 409 on a stale read)."""
        if not self.caches(resource):
            return
        self.live_reads += 1
        try:
            obj = await self.kube.get(resource, name, namespace or None)
        except NotFoundError:
            self._store(resource).remove(namespace, name)
            return
        self.observe_write(obj)

    # --- read-your-writes ---------------------------------------------------------------

    def observe_write(self, obj: Mapping[str, Any]) -> None:
        """A create/patch/update result: the cache holds at least this version from now on.

        A result with a ``deletionTimestamp`` and no finalizers left is an object the write
        released (its last finalizer removed): the API server deletes it, so the cache
        forgets it now. A real server answers that write with the object at the version the
        cache already holds, so storing it would be a no-op and leave the deleting object,
        finalizers and all, until the DELETED event: a pass in between would release it
        again (a second deregistration, a PATCH that gets 404)."""
        kind = str(obj.get("kind") or "")
        store = self.stores.get(kind)
        if store is None:
            return
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            change = store.remove(
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                str(meta.get("resourceVersion") or ""),
            )
        else:
            change = store.upsert(obj)
        if change is not None:
            self._changed(change)

    def observe_delete(self, obj: Mapping[str, Any], response: Mapping[str, Any] | None) -> None:
        """A delete: an object that keeps finalizers stays (with its deletionTimestamp);
        anything else is gone from the cache now."""
        kind = str(obj.get("kind") or "")
        store = self.stores.get(kind)
        if store is None:
            return
        meta = obj.get("metadata") or {}
        if (
            response is not None
            and str(response.get("kind") or "") == kind
            and (response.get("metadata") or {}).get("deletionTimestamp")
            and (response.get("metadata") or {}).get("finalizers")
        ):
            change = store.upsert(response)
        else:
            version = str(((response or {}).get("metadata") or {}).get("resourceVersion") or "")
            change = store.remove(
                str(meta.get("namespace") or ""), str(meta.get("name") or ""), version
            )
        if change is not None:
            self._changed(change)

    def _store(self, resource: Resource | str) -> KindStore:
        kind = _kind(resource)
        store = self.stores.get(kind)
        if store is None:
            raise KeyError(f"{kind} is not cached")
        return store


def _kind(resource: Resource | str) -> str:
    return resource.kind if isinstance(resource, Resource) else resource
