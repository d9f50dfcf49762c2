"""The ``ControllerNamespaceExists`` condition of an AutoscalingRunnerSet.

Listeners live in the controller namespace (``ARCFLOW_RECONCILER_CONTROLLER_NAMESPACE``,
default ``arc-systems``), which the reconciler's chart creates; the reconciler never creates a
namespace (it would need cluster-wide namespace rights, and a made-up namespace hides a wrong
setting). When it is missing, the listener's create is refused 404: the ARS says so with a
Warning Event and ``ControllerNamespaceExists=False`` (the message names the namespace and the
setting), stays ``Pending`` and looks again every ``NAMESPACE_RECHECK_SECONDS``; once the
namespace exists the listener is created and the condition turns ``True`` with a Normal Event.
A server with the upstream CRDs prunes ``status.conditions`` of an ARS (their schema has
none): there the Events and the ``Pending`` phase are what stays visible.
"""

from __future__ import annotations

from arcflow.common.kube import NotFoundError
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.conditions import ars_condition, turn_ars_condition

CONDITION_CONTROLLER_NAMESPACE = "ControllerNamespaceExists"
REASON_NAMESPACE_FOUND = "NamespaceFound"
REASON_NAMESPACE_MISSING = "NamespaceNotFound"
NAMESPACE_RECHECK_SECONDS = 10.0


def is_missing_namespace(error: NotFoundError, namespace: str) -> bool:
    """Whether a 404 on a create says the namespace itself does not exist."""
    return f'namespaces "{namespace}" not found' in error.message


def missing_message(namespace: str) -> str:
    return (
        f'controller namespace "{namespace}" does not exist: no listener can be created '
        f"(create it, as the reconciler's chart does, or set "
        f"ARCFLOW_RECONCILER_CONTROLLER_NAMESPACE)"
    )


async def report_controller_namespace(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, *, exists: bool
) -> AutoscalingRunnerSet:
    """Keep the condition current; a status patch and an Event only when it changes (none
    on an ARS that never saw the namespace missing)."""
    current = ars_condition(ars, CONDITION_CONTROLLER_NAMESPACE)
    key = f"{scope.namespace}/{scope.ars}"
    # The condition when the ARS keeps it, else what this process last reported: the
    # upstream CRDs have no status.conditions, so a real server prunes the condition, and
    # the Event (which it keeps) must still be sent once per change, not once per pass.
    seen = (
        current.status == "True"
        if current is not None
        else ctx.ars_state.controller_namespace_seen.get(key)
    )
    if (seen is None and exists) or seen == exists:
        return ars
    ctx.ars_state.controller_namespace_seen[key] = exists
    namespace = ctx.controller_namespace
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_CONTROLLER_NAMESPACE,
        ok=exists,
        reason=REASON_NAMESPACE_FOUND if exists else REASON_NAMESPACE_MISSING,
        message=(
            f'controller namespace "{namespace}" exists' if exists else missing_message(namespace)
        ),
        about="the controller namespace",
        summary="controller namespace exists" if exists else "controller namespace missing",
    )
