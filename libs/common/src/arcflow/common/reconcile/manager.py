"""The controller runtime (ADR 0095): from a service's declared
:class:`~arcflow.common.reconcile.declare.Controllers` it builds, once, everything between a
change and a controller, for the reconciler and the registrar alike:

* the **routing**: a changed object of a kind wakes the keys the declarations name (the
  object's own key, the owner its ``ownerReferences`` name for an owned kind, a
  :class:`~arcflow.common.reconcile.declare.Watch`'s targets); an event of another service
  wakes an :class:`~arcflow.common.reconcile.declare.OnEvent`'s targets, and is kept when
  the declaration says so;
* the **work queue** (:mod:`arcflow.common.reconcile.workqueue`), with each kind's priority;
* the **typed adapters** (:mod:`arcflow.common.reconcile.adapter`): a key is read, parsed into
  its model and handed to its controller;
* the **state** each controller declares, one object per class;
* with ``cached`` kinds (a service whose trigger is a watch), the watch-fed **cache**
  (:class:`~arcflow.common.cache.ObjectCache`), whose every change (a watch event, or the
  result of the service's own write) is routed at once. A write therefore wakes whatever it
  concerns: a controller never re-queues what it wrote.

The path of one Kubernetes change: informer -> store -> :meth:`Manager._changed` ->
:meth:`Manager.keys_for` -> ``queue.add`` (``add_settled`` for an owned kind's change where the
owner declares ``owned_settle_seconds``) -> :meth:`Manager._reconcile` -> the kind's adapter
-> ``reconcile(ctx, model)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from arcflow.common.cache import CachedKind, Change, ObjectCache
from arcflow.common.kube import KubeClient
from arcflow.common.reconcile.adapter import TypedReconciler
from arcflow.common.reconcile.declare import Controller, Controllers, Target
from arcflow.common.reconcile.keys import Key, Result
from arcflow.common.reconcile.workqueue import WorkQueue

C = TypeVar("C")
T = TypeVar("T")

#: ``run(context, key, call)``: one pass of ``key``; ``call(pass_context)`` runs the kind's
#: adapter with the context the pass uses (``context`` itself, or one made of it and what the
#: pass's triggers saw); a service wraps it in its span, metrics, lock.
Run = Callable[[Any, Key[Any], Callable[[Any], Awaitable[Result]]], Awaitable[Result]]
#: A route: (changed object, lookup) -> the keys it wakes.
_Route = Callable[[Mapping[str, Any], "Manager[Any]"], Iterable[Key[Any]]]
#: A route and how long its keys settle before they are queued (0: at once).
_Routed = tuple[_Route, float]


class KeptEvents:
    """The newest event per (group, member) of the :class:`OnEvent` declarations with ``keep``
    (by ``occurred_at``): the runtime keeps it, controllers read it (and may forget one they
    judged over)."""

    def __init__(self) -> None:
        self._groups: dict[Hashable, dict[str, Any]] = {}

    def keep(self, group: Hashable, member: str, event: Any) -> None:
        members = self._groups.setdefault(group, {})
        held = members.get(member)
        if held is None or held.occurred_at <= event.occurred_at:
            members[member] = event

    def forget(self, group: Hashable, member: str, event: Any) -> None:
        """Drop ``event`` once its reader judged it over (a newer one kept since stays)."""
        members = self._groups.get(group, {})
        if members.get(member) is event:
            del members[member]

    def newest(self, group: Hashable, member: str = "") -> Any | None:
        return self._groups.get(group, {}).get(member)

    def group(self, group: Hashable) -> Mapping[str, Any]:
        """member -> newest event (empty when none was kept)."""
        return self._groups.get(group, {})


class Manager(Generic[C]):
    """A service's controllers, run: build it in the service's ``build``, start ``cache``
    (when there is one) and ``queue`` as components."""

    def __init__(
        self,
        declared: Controllers,
        make_context: Callable[[Manager[C]], C],
        *,
        kube: KubeClient | None = None,
        cached: Sequence[CachedKind] = (),
        home_namespace: str = "",
        run: Run | None = None,
        states: Mapping[type, Any] | None = None,
        on_object: Callable[[str, Any], None] | None = None,
        relist_seconds: float = 900.0,
        delay_seconds: float = 0.0,
        **queue_options: Any,
    ) -> None:
        self.declared = declared
        states = states or {}
        classes = (*declared.state, *(cls for c in declared.controllers for cls in c.state))
        undeclared = set(states) - set(classes)
        if undeclared:
            raise ValueError(f"state no controller declares: {sorted(map(str, undeclared))}")
        self._home = home_namespace
        self._run = run
        self._on_object = on_object
        # One object per declared state class; ``states`` gives those that need arguments.
        self.states: dict[type, Any] = {}
        for cls in classes:
            self.states.setdefault(cls, states[cls] if cls in states else cls())
        self.kept = KeptEvents()
        self._routes = _routes(declared)
        self._adapters = {
            c.kind: TypedReconciler(
                c.resource,
                c.parse,
                c.reconcile,
                declared.read,
                c.on_unparsable or declared.on_unparsable,
                c.on_gone,
            )
            for c in declared.controllers
        }
        queue_options.setdefault("priorities", {c.kind: c.priority for c in declared.controllers})
        self.queue: WorkQueue[Key[Any]] = WorkQueue(self._reconcile, **queue_options)
        self.cache: ObjectCache | None = None
        if cached:
            if kube is None:
                raise ValueError("a cache needs a Kubernetes client")
            missing = declared.routed_kinds - {k.resource.kind for k in cached}
            if missing:
                raise ValueError(f"routed but never watched: {sorted(missing)}")
            self.cache = ObjectCache(
                kube,
                cached,
                on_change=self._changed,
                relist_seconds=relist_seconds,
                delay_seconds=delay_seconds,
            )
        self.context: C = make_context(self)
        self._cache_tasks: list[asyncio.Task[None]] = []

    # --- state --------------------------------------------------------------------------

    def state(self, cls: type[T]) -> T:
        """The one object of a state class a controller declares."""
        found: T = self.states[cls]
        return found

    # --- routing ------------------------------------------------------------------------

    @property
    def home_namespace(self) -> str:
        return self._home

    def objects(self, kind: str, namespace: str) -> Sequence[Mapping[str, Any]]:
        """The cached objects of ``kind`` in ``namespace`` (read-only; for a Watch)."""
        if self.cache is None:
            return []
        return self.cache.list(kind, namespace, shared=True)

    def keys_for(self, kind: str, obj: Mapping[str, Any]) -> list[Key[Any]]:
        """The keys a changed object of ``kind`` wakes, once each, in declaration order."""
        return list(self._wakes(kind, obj))

    def _wakes(self, kind: str, obj: Mapping[str, Any]) -> dict[Key[Any], float]:
        """key -> seconds it settles before it is queued (the shortest route that names it)."""
        wakes: dict[Key[Any], float] = {}
        for route, settle in self._routes.get(kind, ()):
            for key in route(obj, self):
                wakes[key] = min(settle, wakes.get(key, settle))
        return wakes

    def keys_for_event(self, event: Any) -> list[Key[Any]]:
        """The keys an event of another service wakes; kept first where declared."""
        keys: list[Key[Any]] = []
        for controller in self.declared.controllers:
            for source in controller.events:
                if not isinstance(event, source.event_types):
                    continue
                if source.keep is not None:
                    self.kept.keep(*source.keep(event), event)
                keys.extend(_keys(controller.kind, source.targets(event)))
        return list(dict.fromkeys(keys))

    def _changed(self, change: Change) -> None:
        if self._on_object is not None and change.type != "DELETED":
            self._on_object(change.kind, change.obj)
        for key, settle in self._wakes(change.kind, change.obj).items():
            if settle > 0:
                self.queue.add_settled(key, settle)
            else:
                self.queue.add(key)

    def resync(self) -> None:
        """Queue every cached object of the kinds the controllers reconcile (no API call)."""
        if self.cache is None:
            return
        for controller in self.declared.controllers:
            store = self.cache.stores.get(controller.resource.kind)
            for namespace, name in store.object_keys() if store is not None else ():
                self.queue.add(Key(controller.kind, namespace, name))

    # --- running ------------------------------------------------------------------------

    async def _reconcile(self, key: Key[Any]) -> Result:
        adapter = self._adapters[key.kind]

        async def call(ctx: Any) -> Result:
            return await adapter(ctx, key)

        if self._run is None:
            return await call(self.context)
        return await self._run(self.context, key, call)

    async def start_cache(self) -> None:
        """Start the cache and wait for its first lists: passes read from it."""
        if self.cache is None:
            return
        self._cache_tasks = list(self.cache.start())
        await self.cache.synced()

    async def stop_cache(self) -> None:
        if self.cache is not None:
            await self.cache.stop()

    @property
    def cache_alive(self) -> bool:
        return not any(t.done() for t in self._cache_tasks)


def _keys(kind: str, targets: Iterable[Target]) -> Iterable[Key[Any]]:
    return (Key(kind, namespace, name) for namespace, name in targets if name)


def _routes(declared: Controllers) -> dict[str, list[_Routed]]:
    routes: dict[str, list[_Routed]] = {}
    for controller in declared.controllers:
        routes.setdefault(controller.resource.kind, []).append((_own_key(controller), 0.0))
        for kind in controller.owns:
            routed = (_owner_key(controller), controller.owned_settle_seconds)
            routes.setdefault(kind, []).append(routed)
        for watch in controller.watches:
            routed = (_watched(controller.kind, watch.targets), watch.settle_seconds)
            routes.setdefault(watch.kind, []).append(routed)
    return routes


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _own_key(controller: Controller[Any, Any]) -> _Route:
    def route(obj: Mapping[str, Any], _lookup: Manager[Any]) -> Iterable[Key[Any]]:
        meta = _meta(obj)
        target = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        return _keys(controller.kind, [target])

    return route


def _owner_key(controller: Controller[Any, Any]) -> _Route:
    owner_kind = controller.resource.kind

    def route(obj: Mapping[str, Any], _lookup: Manager[Any]) -> Iterable[Key[Any]]:
        meta = _meta(obj)
        namespace = str(meta.get("namespace") or "")
        refs = meta.get("ownerReferences") or []
        return _keys(
            controller.kind,
            [
                (namespace, str(ref.get("name") or ""))
                for ref in refs
                if isinstance(ref, Mapping) and ref.get("kind") == owner_kind
            ],
        )

    return route


def _watched(kind: str, targets: Callable[[Mapping[str, Any], Any], Iterable[Target]]) -> _Route:
    def route(obj: Mapping[str, Any], lookup: Manager[Any]) -> Iterable[Key[Any]]:
        return _keys(kind, targets(obj, lookup))

    return route
