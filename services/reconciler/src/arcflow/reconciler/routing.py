"""The reconciler's routes that are not an object's own key or its owner (pure): which
AutoscalingRunnerSet or listener a watched object or another service's event concerns. The
controllers declare them (``controllers/declared.py``, ADR 0095); the controller runtime
(:mod:`arcflow.common.reconcile.manager`) calls them. Changes never carry state; only keys.

The reconciler has one trigger per source (ADR 0069): a Kubernetes change comes only from its
own watch-fed cache; the registrar's and the listener's events (scale set assigned/deleted,
registration and session failures), which no watch can see, from their streams.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from arcflow.common.constants import (
    KIND_ARS,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.events import EventBase, SessionFailed, SessionOpened
from arcflow.reconciler.controllers.manifest import labels_of, meta

Target = tuple[str, str]


class Lookup(Protocol):
    """What a route may read besides the object (``arcflow.common.reconcile.declare.Lookup``)."""

    @property
    def home_namespace(self) -> str: ...

    def objects(self, kind: str, namespace: str) -> Sequence[Mapping[str, Any]]: ...


def ars_of_labels(obj: Mapping[str, Any], _lookup: Lookup | None = None) -> list[Target]:
    """A runner set or listener: the ARS its scale-set labels name (none without them)."""
    labels = labels_of(obj)
    name = labels.get(LABEL_SCALE_SET_NAME)
    if not name:
        return []
    return [(labels.get(LABEL_SCALE_SET_NAMESPACE) or str(meta(obj).get("namespace") or ""), name)]


def listener_of_rbac(obj: Mapping[str, Any], lookup: Lookup) -> list[Target]:
    """A listener's ServiceAccount, Role or RoleBinding: the listener its labels name (in the
    controller namespace unless they say another)."""
    labels = labels_of(obj)
    listener = labels.get(LABEL_LISTENER_NAME)
    if not listener:
        return []
    return [(labels.get(LABEL_LISTENER_NAMESPACE) or lookup.home_namespace, listener)]


def sets_using_quota(obj: Mapping[str, Any], lookup: Lookup) -> list[Target]:
    """A ResourceQuota: the sets of its namespace (from the cache) that take their budget from
    it (``spec.capacity.fromResourceQuota``, ADR 0062)."""
    namespace = str(meta(obj).get("namespace") or "")
    targets: list[Target] = []
    for ars in lookup.objects(KIND_ARS, namespace):
        capacity = (ars.get("spec") or {}).get("capacity")
        if isinstance(capacity, Mapping) and capacity.get("fromResourceQuota") is True:
            name = str(meta(ars).get("name") or "")
            if name:
                targets.append((namespace, name))
    return targets


def ars_of_event(event: EventBase) -> list[Target]:
    """The ARS an event of the registrar or the listener is about."""
    if event.keys.namespace and event.keys.ars:
        return [(event.keys.namespace, event.keys.ars)]
    return []


def registrations_of(namespace: str, ars: str) -> tuple[str, str, str]:
    """The group the newest ``registration.failed`` of an ARS is kept in (one member, "")."""
    return ("registration", namespace, ars)


def sessions_of(namespace: str, ars: str) -> tuple[str, str, str]:
    """The group the newest ``session.failed``/``session.opened`` per variant is kept in."""
    return ("session", namespace, ars)


def registration_group(event: EventBase) -> tuple[tuple[str, str, str], str]:
    return registrations_of(event.keys.namespace or "", event.keys.ars or ""), ""


def session_group(event: SessionFailed | SessionOpened) -> tuple[tuple[str, str, str], str]:
    return sessions_of(event.keys.namespace or "", event.keys.ars or ""), event.variant
