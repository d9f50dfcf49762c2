"""Which reconcile keys a change asks for (pure). Changes never carry state; only keys.

The reconciler has one trigger per source (ADR 0069):

* a Kubernetes change comes only from its own watch-fed cache: the cache's ``on_change``
  (``cache.py``) calls :func:`keys_for_change` with the changed object and enqueues what it
  returns; the watcher's ``k8s.object.changed`` stream is not consumed (it is for auditors);
* the registrar's and the listener's events (scale set assigned/deleted, registration and
  session failures), which no watch can see, go through :func:`keys_for_event`.

:data:`ROUTED_KINDS` is every Kubernetes kind a change can route on; an architecture test
checks that each is one the cache watches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from arcflow.common.constants import (
    KIND_AL,
    KIND_ARS,
    KIND_ER,
    KIND_ERS,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.events import (
    EventBase,
    RegistrationFailed,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SessionFailed,
    SessionOpened,
)
from arcflow.reconciler.keys import Key

KIND_POD, KIND_SECRET, KIND_SERVICE_ACCOUNT = "Pod", "Secret", "ServiceAccount"
KIND_ROLE, KIND_ROLE_BINDING, KIND_RESOURCE_QUOTA = "Role", "RoleBinding", "ResourceQuota"

#: Kinds whose owner (an EphemeralRunner, an EphemeralRunnerSet, an AutoscalingListener) is
#: reconciled when they change.
_OWNED_KINDS = frozenset({KIND_POD, KIND_SECRET, KIND_ER, KIND_SERVICE_ACCOUNT})
_LISTENER_RBAC_KINDS = frozenset({KIND_ROLE, KIND_ROLE_BINDING, KIND_SERVICE_ACCOUNT})
_OWNER_KEY_KINDS = {KIND_ER: "er", KIND_ERS: "ers", KIND_AL: "al"}
#: Every kind :func:`keys_for_change` routes on.
ROUTED_KINDS: Final = frozenset(
    {KIND_ARS, KIND_ERS, KIND_AL, KIND_RESOURCE_QUOTA, *_OWNED_KINDS, *_LISTENER_RBAC_KINDS}
)
#: The events of other services that ask for a reconcile (each names its ARS in its keys).
ROUTED_EVENTS: Final = (
    ScaleSetAssigned,
    ScaleSetDeleted,
    RegistrationFailed,
    SessionFailed,
    SessionOpened,
)

#: The AutoscalingRunnerSets of a namespace, from the cache (for a ResourceQuota change).
SetsIn = Callable[[str], Iterable[Mapping[str, Any]]]


def keys_for_change(
    kind: str, obj: Mapping[str, Any], controller_namespace: str, sets_in: SetsIn
) -> list[Key]:
    """The keys a changed object of ``kind`` asks for, from the object itself."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    if kind == KIND_RESOURCE_QUOTA:
        return keys_for_quota(namespace, sets_in(namespace))
    raw_labels = meta.get("labels") or {}
    labels = (
        {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, Mapping) else {}
    )
    keys: list[Key] = []
    ars_name = labels.get(LABEL_SCALE_SET_NAME)
    ars_namespace = labels.get(LABEL_SCALE_SET_NAMESPACE) or namespace
    if kind == KIND_ARS:
        keys.append(Key("ars", namespace, name))
    elif kind == KIND_ERS:
        keys.append(Key("ers", namespace, name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    elif kind == KIND_ER:
        keys.append(Key("er", namespace, name))
    elif kind == KIND_AL:
        keys.append(Key("al", namespace, name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    listener = labels.get(LABEL_LISTENER_NAME)
    if listener and kind in _LISTENER_RBAC_KINDS:
        keys.append(
            Key("al", labels.get(LABEL_LISTENER_NAMESPACE) or controller_namespace, listener)
        )
    if kind in _OWNED_KINDS:
        for ref in meta.get("ownerReferences") or []:
            if not isinstance(ref, Mapping):
                continue
            key_kind = _OWNER_KEY_KINDS.get(str(ref.get("kind") or ""))
            if key_kind is not None:
                keys.append(Key(key_kind, namespace, str(ref.get("name") or "")))  # type: ignore[arg-type]
    return list(dict.fromkeys(keys))


def keys_for_event(event: EventBase) -> list[Key]:
    """The ARS an event of the registrar or the listener (:data:`ROUTED_EVENTS`) is about."""
    if isinstance(event, ROUTED_EVENTS) and event.keys.namespace and event.keys.ars:
        return [Key("ars", event.keys.namespace, event.keys.ars)]
    return []


def keys_for_quota(namespace: str, sets: Iterable[Mapping[str, Any]]) -> list[Key]:
    """A ResourceQuota change in ``namespace``: the sets there (``sets``, from the cache) that
    take their budget from it (``spec.capacity.fromResourceQuota``, ADR 0062)."""
    keys: list[Key] = []
    for ars in sets:
        capacity = (ars.get("spec") or {}).get("capacity")
        if isinstance(capacity, Mapping) and capacity.get("fromResourceQuota") is True:
            name = str((ars.get("metadata") or {}).get("name") or "")
            if name:
                keys.append(Key("ars", namespace, name))
    return keys
