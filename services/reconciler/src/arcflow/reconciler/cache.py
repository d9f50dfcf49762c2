"""The reconciler's watch-fed cache (ADR 0010), and its only Kubernetes trigger (ADR 0069).

Reconciles read the four ARC kinds, runner and listener pods, our Secrets, the listener's
ServiceAccount/Role/RoleBinding and ResourceQuotas from here; only writes go to the API server.

The path of one Kubernetes change into a controller: the cache's watch applies it to its store,
then calls ``on_change`` below, which asks :func:`arcflow.reconciler.routing.keys_for_change`
(pure) for the keys it concerns and adds them to the work queue; the queue runs
``ReconcilerState._reconcile`` (``state.py``), which calls ``CONTROLLERS[key.kind]``. The change
is in the store before its key is queued, so a reconcile never reads a cache older than the
change that triggered it, and the reconciler's own writes are applied to the store as they
return (``observe_write``), before any reconcile that follows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from arcflow.common.cache import CachedKind, Change, ObjectCache
from arcflow.common.constants import LABEL_PART_OF, PART_OF_VALUE
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    RESOURCE_QUOTA,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    KubeClient,
)
from arcflow.reconciler.keys import Key
from arcflow.reconciler.routing import keys_for_change

# Runner pods and JIT Secrets carry this label (the builders put it there); Secrets without it
# (the GitHub credentials a user created) are read from the API server when needed.
OWNED_SELECTOR = {LABEL_PART_OF: PART_OF_VALUE}

CACHED_KINDS = (
    CachedKind(AUTOSCALING_RUNNER_SET),
    CachedKind(EPHEMERAL_RUNNER_SET),
    CachedKind(EPHEMERAL_RUNNER),
    CachedKind(AUTOSCALING_LISTENER),
    CachedKind(POD, OWNED_SELECTOR),
    CachedKind(SECRET, OWNED_SELECTOR),
    # The listener's RBAC bundle: read on every listener pass (the resync included), and a
    # change to one of them (drift) re-queues its listener through the routing.
    CachedKind(SERVICE_ACCOUNT, OWNED_SELECTOR),
    CachedKind(ROLE, OWNED_SELECTOR),
    CachedKind(ROLE_BINDING, OWNED_SELECTOR),
    # capacity.fromResourceQuota (ADR 0062): a quota change re-queues the sets that use it.
    CachedKind(RESOURCE_QUOTA),
)

#: Where each kind lives, in a namespace-scoped install (``namespaces`` set): the sets, runners
#: and the listener's Role/RoleBinding in the ARS's namespace (a managed one); listeners and
#: their ServiceAccounts in the controller namespace; pods and Secrets in both (runner pods and
#: JIT Secrets next to their runner, listener pods and config Secrets next to their listener).
_MANAGED, _CONTROLLER, _BOTH = "managed", "controller", "both"
_SCOPE_OF_KIND = {
    AUTOSCALING_RUNNER_SET.kind: _MANAGED,
    EPHEMERAL_RUNNER_SET.kind: _MANAGED,
    EPHEMERAL_RUNNER.kind: _MANAGED,
    AUTOSCALING_LISTENER.kind: _CONTROLLER,
    POD.kind: _BOTH,
    SECRET.kind: _BOTH,
    SERVICE_ACCOUNT.kind: _CONTROLLER,
    ROLE.kind: _MANAGED,
    ROLE_BINDING.kind: _MANAGED,
    RESOURCE_QUOTA.kind: _MANAGED,
}


def cached_kinds(namespaces: Sequence[str], controller_namespace: str) -> tuple[CachedKind, ...]:
    """:data:`CACHED_KINDS`, cluster-wide when ``namespaces`` is empty; else each kind listed
    and watched in the namespaces it lives in (see ``_SCOPE_OF_KIND``), never cluster-wide."""
    if not namespaces:
        return CACHED_KINDS
    managed = tuple(sorted(set(namespaces)))
    both = tuple(sorted({*managed, controller_namespace}))
    where = {_MANAGED: managed, _CONTROLLER: (controller_namespace,), _BOTH: both}
    return tuple(
        replace(kind, namespaces=where[_SCOPE_OF_KIND[kind.resource.kind]]) for kind in CACHED_KINDS
    )


_KEY_KINDS = (
    ("ars", AUTOSCALING_RUNNER_SET.kind),
    ("al", AUTOSCALING_LISTENER.kind),
    ("ers", EPHEMERAL_RUNNER_SET.kind),
    ("er", EPHEMERAL_RUNNER.kind),
)


def build_cache(
    kube: KubeClient,
    enqueue: Callable[[Key], None],
    controller_namespace: str,
    *,
    relist_seconds: float,
    delay_seconds: float = 0.0,
    namespaces: Sequence[str] = (),
    on_object: Callable[[str, Any], None] | None = None,
) -> ObjectCache:
    """The cache of :func:`cached_kinds` (``namespaces``: the managed ones; empty: all).
    ``on_object(kind, object)`` sees every change as it arrives (the stage clock, ADR 0065)."""

    def sets_in(namespace: str) -> list[Any]:
        return cache.list(AUTOSCALING_RUNNER_SET, namespace, shared=True)

    def on_change(change: Change) -> None:
        if on_object is not None and change.type != "DELETED":
            on_object(change.kind, change.obj)
        for key in keys_for_change(change.kind, change.obj, controller_namespace, sets_in):
            enqueue(key)

    cache = ObjectCache(
        kube,
        cached_kinds(namespaces, controller_namespace),
        on_change=on_change,
        relist_seconds=relist_seconds,
        delay_seconds=delay_seconds,
    )
    return cache


def cached_keys(cache: ObjectCache) -> list[Key]:
    """Every key the cache knows (the periodic resync re-queues these, no API call)."""
    keys: list[Key] = []
    for key_kind, kind in _KEY_KINDS:
        for namespace, name in cache.stores[kind].object_keys():
            keys.append(Key(key_kind, namespace, name))  # type: ignore[arg-type]
    return keys
