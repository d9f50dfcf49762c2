"""What the reconciler's watch-fed cache (ADR 0010) watches: its only Kubernetes trigger (ADR
0069).

Reconciles read the four ARC kinds, runner and listener pods, our Secrets, the listener's
ServiceAccount/Role/RoleBinding and ResourceQuotas from here; only writes go to the API server.
The controller runtime (:mod:`arcflow.common.reconcile.manager`, ADR 0095) builds the cache of
these kinds and routes each change to the keys the controllers' declarations
(``controllers/declared.py``) name. The change is in the store before its key is queued, so a
reconcile never reads a cache older than the change that triggered it, and the reconciler's own
writes are applied to the store as they return (``observe_write``), which routes them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from arcflow.common.cache import CachedKind
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
)

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
    # change to one of them (drift) wakes its listener (declared.py).
    CachedKind(SERVICE_ACCOUNT, OWNED_SELECTOR),
    CachedKind(ROLE, OWNED_SELECTOR),
    CachedKind(ROLE_BINDING, OWNED_SELECTOR),
    # capacity.fromResourceQuota (ADR 0062): a quota change wakes the sets that use it.
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
