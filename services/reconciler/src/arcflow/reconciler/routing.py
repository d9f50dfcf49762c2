"""Which reconcile keys an event asks for (pure). Events never carry state; only keys."""

from __future__ import annotations

from arcflow.common.constants import (
    KIND_AL,
    KIND_ER,
    KIND_ERS,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.events import EventBase, K8sObjectChanged, ScaleSetAssigned, ScaleSetDeleted
from arcflow.reconciler.workqueue import Key

_OWNED_RESOURCES = ("pods", "secrets", "ephemeralrunners", "serviceaccounts")
_OWNER_KINDS = {KIND_ER: "er", KIND_ERS: "ers", KIND_AL: "al"}


def keys_for(event: EventBase, controller_namespace: str) -> list[Key]:
    if isinstance(event, (ScaleSetAssigned, ScaleSetDeleted)):
        if event.keys.namespace and event.keys.ars:
            return [Key("ars", event.keys.namespace, event.keys.ars)]
        return []
    if not isinstance(event, K8sObjectChanged):
        return []
    keys: list[Key] = []
    ars_name = event.labels.get(LABEL_SCALE_SET_NAME)
    ars_namespace = event.labels.get(LABEL_SCALE_SET_NAMESPACE) or event.namespace
    resource = event.resource
    if resource == "autoscalingrunnersets":
        keys.append(Key("ars", event.namespace, event.name))
    elif resource == "ephemeralrunnersets":
        keys.append(Key("ers", event.namespace, event.name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    elif resource == "ephemeralrunners":
        keys.append(Key("er", event.namespace, event.name))
    elif resource == "autoscalinglisteners":
        keys.append(Key("al", event.namespace, event.name))
        if ars_name:
            keys.append(Key("ars", ars_namespace, ars_name))
    listener = event.labels.get(LABEL_LISTENER_NAME)
    if listener and resource in ("roles", "rolebindings", "serviceaccounts"):
        keys.append(
            Key("al", event.labels.get(LABEL_LISTENER_NAMESPACE) or controller_namespace, listener)
        )
    for ref in event.owner_references:
        kind = _OWNER_KINDS.get(ref.kind)
        if kind is not None and resource in (
            "pods",
            "secrets",
            "ephemeralrunners",
            "serviceaccounts",
        ):
            keys.append(Key(kind, event.namespace, ref.name))  # type: ignore[arg-type]
    return list(dict.fromkeys(keys))
