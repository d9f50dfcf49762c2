"""The ``ListenerSessionsOpen`` condition of an AutoscalingRunnerSet (ADR 0064, amendment;
ADR 0073): the listener cannot open a message session for one of its variants (a conflicting
session, the nil session id, any other error), said where ``kubectl describe`` and ``kubectl
get ars`` look, with a Warning Event naming the variant when it turns bad and a Normal one
when every session is open again. The failures come from the listener's ``session.failed``
and ``session.opened`` events (``errors_changes``); which sessions are open now comes from the
listener's sessions bucket (:mod:`arcflow.reconciler.listener_sessions`), read only while the
condition is False or a failure was reported; the decision is :mod:`sessions_rules`."""

from __future__ import annotations

from collections.abc import Mapping

from arcflow.common.events import SessionFailed, utc_now
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.conditions import ars_condition, turn_ars_condition
from arcflow.reconciler.controllers.sessions_rules import (
    CONDITION_SESSIONS,
    SessionState,
    decide,
    needs_open_sessions,
)
from arcflow.reconciler.routing import sessions_of


async def check_sessions(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, ids: Mapping[str, int]
) -> AutoscalingRunnerSet:
    """Keep the condition current (``ids``: each wanted variant's scale set id); a status
    write and an Event only when it turns or its reason or message changes. Returns the ARS
    as written (itself when nothing was)."""
    events = ctx.kept.group(sessions_of(scope.namespace, scope.ars))
    states = {
        variant: SessionState(
            variant,
            isinstance(event, SessionFailed),
            event.reason if isinstance(event, SessionFailed) else "",
            event.message if isinstance(event, SessionFailed) else "",
            event.occurred_at,
            event.scale_set_id,
        )
        for variant, event in events.items()
    }
    current = ars_condition(ars, CONDITION_SESSIONS)
    open_now: set[str] | None = None
    if ctx.listener_sessions is not None and needs_open_sessions(current, states, ids):
        open_ids = await ctx.listener_sessions.open_among(ids.values())
        if open_ids is not None:
            open_now = {v for v, i in ids.items() if i in open_ids}
    verdict = decide(current, states, ids, utc_now(), open_now)
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
