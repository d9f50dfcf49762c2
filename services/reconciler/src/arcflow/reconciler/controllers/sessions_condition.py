"""The ``ListenerSessionsOpen`` condition of an AutoscalingRunnerSet (ADR 0064, amendment):
the listener cannot open a message session for one of its variants (a conflicting session,
the nil session id, any other error), said where ``kubectl describe`` and ``kubectl get ars``
look, with a Warning Event naming the variant when it turns bad and a Normal one when every
session is open again. The states come from the listener's ``session.failed`` and
``session.opened`` events (``errors_changes``); the decision is :mod:`sessions_rules`."""

from __future__ import annotations

from collections.abc import Sequence

from arcflow.common.events import SessionFailed, utc_now
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.conditions import condition_of, turn_ars_condition
from arcflow.reconciler.controllers.sessions_rules import (
    CONDITION_SESSIONS,
    SessionState,
    decide,
)


async def check_sessions(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, variants: Sequence[str]
) -> AutoscalingRunnerSet:
    """Keep the condition current; a status write and an Event only when it turns or its
    reason or message changes. Returns the ARS as written (itself when nothing was)."""
    events = ctx.ars_state.session_states.get((scope.namespace, scope.ars), {})
    states = {
        variant: SessionState(
            variant,
            isinstance(event, SessionFailed),
            event.reason if isinstance(event, SessionFailed) else "",
            event.message if isinstance(event, SessionFailed) else "",
            event.occurred_at,
        )
        for variant, event in events.items()
    }
    current = condition_of(ars.manifest, CONDITION_SESSIONS)
    verdict = decide(current, states, list(variants), utc_now())
    if verdict is None:
        return ars
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_SESSIONS,
        ok=verdict.ok,
        reason=verdict.reason,
        message=verdict.message,
        about="the listener's message sessions",
        summary="listener sessions open" if verdict.ok else f"sessions: {verdict.reason}",
        since=verdict.since,
    )
