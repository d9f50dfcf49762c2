"""The ``ScaleSetsRegistered`` condition of an AutoscalingRunnerSet (ADR 0064): why the
registrar cannot register its scale sets (GitHub unreachable, credentials refused or
unusable, a CA or proxy object unusable, a scale set deleted on the GitHub side), said where
``kubectl describe`` and ``kubectl get ars`` look, with a Warning Event when it turns bad and a
Normal one when it is fixed. The failures come from the registrar's ``registration.failed``
events (``errors_changes``); the decision is :mod:`registration_rules`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arcflow.common.events import utc_now
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.assignments import ScaleSetAssignment
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.conditions import ars_condition, turn_ars_condition
from arcflow.reconciler.controllers.registration_rules import (
    CONDITION_REGISTERED,
    Failure,
    decide,
    is_current,
)
from arcflow.reconciler.routing import registrations_of


async def check_registration(
    ctx: Context,
    ars: AutoscalingRunnerSet,
    scope: Scope,
    variants: Sequence[str],
    assignments: Mapping[str, ScaleSetAssignment],
) -> AutoscalingRunnerSet:
    """Keep the condition current; a status write and an Event only when it turns or its
    reason changes. Returns the ARS as written (itself when nothing was)."""
    group = registrations_of(scope.namespace, scope.ars)
    event = ctx.kept.newest(group)
    written = {v: a.updated_at for v, a in assignments.items() if v in variants and a.updated_at}
    failure = None
    if event is not None:
        failure = Failure(event.variant, event.kind, event.reason, event.occurred_at)
        if not is_current(failure, written):
            ctx.kept.forget(group, "", event)  # a record was written since: it is over
            failure = None
    current = ars_condition(ars, CONDITION_REGISTERED)
    verdict = decide(current, failure, list(variants), written, utc_now())
    if verdict is None:
        return ars
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_REGISTERED,
        ok=verdict.ok,
        reason=verdict.reason,
        message=verdict.message,
        about="the scale set registration",
        summary="scale sets registered" if verdict.ok else f"registration: {verdict.reason}",
        since=verdict.since,
    )
