"""Controllers, declared (the shape of controller-runtime's ``SetupWithManager``, ADR 0095).

A :class:`Controller` says, in one place, what a controller reconciles (its key kind, the
resource its keys name, how a document becomes its model, the reconcile function), the kinds
it *owns* (a change of one wakes the owner its ``ownerReferences`` name), the other kinds that
wake it (:class:`Watch`: a label, a lookup), the events of other services that wake it
(:class:`OnEvent`) and the state it keeps between passes (classes the runtime makes once).

A service lists its controllers in :class:`Controllers`, in its
:class:`~arcflow.common.service.ServiceSpec`; :class:`~arcflow.common.reconcile.manager.Manager`
builds the routing, the work queue, the typed adapters (and, when the service's trigger is a
watch, the cache) from it, and the flow table in docs/events.md shows it. Declarations only:
nothing here runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from arcflow.common.kube.resources import Resource
from arcflow.common.reconcile.adapter import (
    Manifest,
    OnGone,
    OnUnparsable,
    ReadObject,
    done_when_gone,
)
from arcflow.common.reconcile.keys import Result

C = TypeVar("C")
M = TypeVar("M")

#: (namespace, name) of an object a controller's keys name.
Target = tuple[str, str]


class Lookup(Protocol):
    """What a :class:`Watch` may consult besides the changed object: the service's cache and
    its home namespace (the reconciler's controller namespace)."""

    @property
    def home_namespace(self) -> str: ...

    def objects(self, kind: str, namespace: str) -> Sequence[Mapping[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Watch:
    """A change of ``kind`` wakes the objects ``targets(obj, lookup)`` names."""

    kind: str
    targets: Callable[[Mapping[str, Any], Lookup], Iterable[Target]]
    #: How it routes, in a few words (the flow table shows it).
    how: str
    #: Like ``Controller.owned_settle_seconds`` for this route: a change wakes the targets this
    #: many seconds after the first such change, and the changes in between coalesce into one
    #: pass (0: at once). For a target whose pass reads everything the kind feeds it and has
    #: nothing urgent to do about one change (ADR 0123).
    settle_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class OnEvent:
    """An event of ``event_types`` (from another service) wakes the objects ``targets(event)``
    names. With ``keep``, the runtime keeps the newest such event (by ``occurred_at``) per
    ``keep(event)`` = (group, member), where the controller reads it (``Manager.kept``): the
    event's own memory, as a cache is a watch's (no handler writes a controller's state)."""

    event_types: tuple[type, ...]
    targets: Callable[[Any], Iterable[Target]]
    keep: Callable[[Any], tuple[Hashable, str]] | None = None


@dataclass(frozen=True, slots=True)
class Controller(Generic[C, M]):
    """One controller: ``kind`` keys of ``resource``, parsed by ``parse``, reconciled by
    ``reconcile(ctx, model)``."""

    kind: str
    resource: Resource
    parse: Callable[[Manifest], M]
    reconcile: Callable[[C, M], Awaitable[Result]]
    #: Kinds whose ``ownerReferences`` name a ``resource`` object: their change wakes it.
    owns: tuple[str, ...] = ()
    #: A change of an owned kind wakes the owner this many seconds after the first such
    #: change instead of at once, and the changes in between coalesce into that one pass
    #: (``WorkQueue.add_settled``); its own object's changes, watches and events wake it at
    #: once. For an owner whose pass reads all its children and has nothing urgent to do
    #: about one child's change (ADR 0117).
    owned_settle_seconds: float = 0.0
    watches: tuple[Watch, ...] = ()
    events: tuple[OnEvent, ...] = ()
    #: The state it keeps between passes: classes made once (no arguments) by the runtime;
    #: two controllers naming one class share the one object.
    state: tuple[type, ...] = ()
    #: Waiting keys are taken lower first (then first in, first out).
    priority: int = 0
    #: ``None``: the service's (:attr:`Controllers.on_unparsable`).
    on_unparsable: OnUnparsable[C] | None = None
    on_gone: OnGone[C] = done_when_gone

    @property
    def model_name(self) -> str:
        owner = getattr(self.parse, "__self__", None)
        return owner.__name__ if isinstance(owner, type) else self.parse.__name__


@dataclass(frozen=True, slots=True)
class Controllers:
    """A service's controllers and what they share: how a pass reads its primary object and
    what it does with one that does not parse."""

    controllers: tuple[Controller[Any, Any], ...]
    read: ReadObject[Any]
    on_unparsable: OnUnparsable[Any]
    #: State the shared parts keep (what ``on_unparsable`` has said already), made as a
    #: controller's is.
    state: tuple[type, ...] = ()

    def __post_init__(self) -> None:
        kinds = [c.kind for c in self.controllers]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"a key kind is declared twice: {kinds}")

    def by_kind(self, kind: str) -> Controller[Any, Any]:
        for controller in self.controllers:
            if controller.kind == kind:
                return controller
        raise KeyError(kind)

    @property
    def routed_kinds(self) -> frozenset[str]:
        """Every Kubernetes kind whose change wakes a controller."""
        kinds = set()
        for c in self.controllers:
            kinds |= {c.resource.kind, *c.owns, *(w.kind for w in c.watches)}
        return frozenset(kinds)

    @property
    def event_types(self) -> frozenset[type]:
        return frozenset(t for c in self.controllers for e in c.events for t in e.event_types)
