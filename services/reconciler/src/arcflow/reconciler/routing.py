"""Which reconcile keys an event asks for (pure). Events never carry state; only keys.

:data:`ROUTED_RESOURCES` is every Kubernetes resource a change can route on; the flow-table
test checks each is watched, by the watcher (events) or by the reconciler's own watch-fed cache
(the listener's ServiceAccount, Role and RoleBinding).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from arcflow.common.constants import (
    KIND_AL,
    KIND_ER,
    KIND_ERS,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.events import (
    EventBase,
    K8sObjectChanged,
    RegistrationFailed,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SessionFailed,
    SessionOpened,
)
from arcflow.reconciler.keys import Key

_OWNED_RESOURCES = ("pods", "secrets", "ephemeralrunners", "serviceaccounts")
_OWNER_KINDS = {KIND_ER: "er", KIND_ERS: "ers", KIND_AL: "al"}
#: Every resource :func:`keys_for` and :func:`keys_for_object` route on.
ROUTED_RESOURCES: Final = frozenset(
    {
        "autoscalingrunnersets",
        "ephemeralrunnersets",
        "ephemeralrunners",
        "autoscalinglisteners",
        "roles",
        "rolebindings",
        "resourcequotas",
        *_OWNED_RESOURCES,
    }
)


def keys_for(event: EventBase, controller_namespace: str) -> list[Key]:
    if isinstance(
        event,
        ScaleSetAssigned | ScaleSetDeleted | RegistrationFailed | SessionFailed | SessionOpened,
    ):
        if event.keys.namespace and event.keys.ars:
            return [Key("ars", event.keys.namespace, event.keys.ars)]
        return []
    if not isinstance(event, K8sObjectChanged):
        return []
    return _keys(
        event.resource,
        event.namespace,
        event.name,
        event.labels,
        [(ref.kind, ref.name) for ref in event.owner_references],
        controller_namespace,
    )


def keys_for_object(resource: str, obj: Mapping[str, Any], controller_namespace: str) -> list[Key]:
    """The keys a changed object asks for, from the object itself (the cache's changes)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    owners = [
        (str(ref.get("kind") or ""), str(ref.get("name") or ""))
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, Mapping)
    ]
    return _keys(
        resource,
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
        owners,
        controller_namespace,
    )


def _keys(
    resource: str,
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    owners: list[tuple[str, str]],
    controller_namespace: str,
) -> list[Key]:
    keys: list[Key] = []
    ars_name = labels.get(LABEL_SCALE_SET_NAME)
    ars_namespace = labels.get(LABEL_SCALE_SET_NAMESPACE) or namespace
    if resource == "autoscalingrunnersets":
        keys.append(Key("ars", namespace, name))
    elif resource == "ephemeralrunnersets":
        keys.append(Key("ers", namespace, name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    elif resource == "ephemeralrunners":
        keys.append(Key("er", namespace, name))
    elif resource == "autoscalinglisteners":
        keys.append(Key("al", namespace, name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    listener = labels.get(LABEL_LISTENER_NAME)
    if listener and resource in ("roles", "rolebindings", "serviceaccounts"):
        keys.append(
            Key("al", labels.get(LABEL_LISTENER_NAMESPACE) or controller_namespace, listener)
        )
    for owner_kind, owner_name in owners:
        kind = _OWNER_KINDS.get(owner_kind)
        if kind is not None and resource in _OWNED_RESOURCES:
            keys.append(Key(kind, namespace, owner_name))  # type: ignore[arg-type]
    return list(dict.fromkeys(keys))


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
