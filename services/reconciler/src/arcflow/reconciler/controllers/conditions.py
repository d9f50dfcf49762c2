"""One AutoscalingRunnerSet condition turned: a Kubernetes Event where ``kubectl describe``
looks (Normal when the check passes, Warning when it fails) and the condition written into
the ARS status in place of any earlier one of its type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from arcflow.common.events import utc_now
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, build_event
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.models.autoscaling_runner_set import Condition
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.capacity_rules import CONDITION_DRAINED, DrainState
from arcflow.reconciler.controllers.manifest import Manifest


def conditions_of(doc: Manifest) -> list[dict[str, Any]]:
    """``status.conditions`` of an ARS manifest (conditions are not part of its model: they
    are kept as the live document holds them, so a status patch rewrites them unchanged)."""
    return list((doc.get("status") or {}).get("conditions") or [])


def condition_of(doc: Manifest, kind: str) -> dict[str, Any] | None:
    """The condition ``kind`` of an ARS manifest, for an ARS that may not parse
    (``ars_spec``); a parsed one reads :func:`ars_condition`."""
    return next((c for c in conditions_of(doc) if c.get("type") == kind), None)


def ars_condition(ars: AutoscalingRunnerSet, kind: str) -> Condition | None:
    """The condition ``kind`` of a parsed ARS (ADR 0071: read through the model)."""
    return ars.condition(kind)


def other_conditions(ars: AutoscalingRunnerSet, kind: str) -> list[dict[str, Any]]:
    """Every condition but ``kind``, in their wire form (only the keys the live document
    holds), for the status patch that replaces the list."""
    conditions = (ars.status.conditions if ars.status else None) or []
    return [
        c.model_dump(by_alias=True, exclude_unset=True, mode="json")
        for c in conditions
        if c.type != kind
    ]


async def turn_ars_condition(
    ctx: Context,
    ars: AutoscalingRunnerSet,
    scope: Scope,
    *,
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    about: str,
    summary: str,
    since: datetime | None = None,
) -> AutoscalingRunnerSet:
    """``about`` names the Event in the audit trail, ``summary`` the status write; returns
    the ARS as written. ``since``: the condition's ``lastTransitionTime`` when it is not now
    (when the failure it reports happened)."""
    doc = ars.manifest
    event = build_event(
        doc, reason, message, type="Normal" if ok else "Warning", component="arcflow-reconciler"
    )
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, f"Kubernetes Event about {about}")
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": ars.metadata.generation,
        "lastTransitionTime": (since or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    others = other_conditions(ars, kind)
    written = await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition]},
        scope,
        summary,
    )
    return AutoscalingRunnerSet.from_observed(written)


async def report_drain(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, state: DrainState | None
) -> AutoscalingRunnerSet:
    """The ``Drained`` condition (ADR 0062): ``False``/``Draining`` while a drained variant
    still has runners or its listener has not applied the drain, ``True``/``Drained`` after;
    ``status.drain`` repeats the reason for the printer column. A Normal Event when it turns.
    Without a drain, an earlier condition is removed. Writes only what changes."""
    drain = ars.status.drain if ars.status else None
    current = ars_condition(ars, CONDITION_DRAINED)
    others = other_conditions(ars, CONDITION_DRAINED)
    if state is None:
        if current is None and drain is None:
            return ars
        written = await ctx.writer.patch_status(
            AUTOSCALING_RUNNER_SET.kind,
            scope.ars,
            scope.namespace,
            {"conditions": others, "drain": None},
            scope,
            "status: drain ended, Drained condition removed",
        )
        return AutoscalingRunnerSet.from_observed(written)
    want_status = "True" if state.drained else "False"
    if (
        current is not None
        and current.status == want_status
        and current.message == state.message
        and drain == state.reason
    ):
        return ars
    turned = current is None or current.status != want_status
    if turned:
        event = build_event(
            ars.manifest, state.reason, state.message, component="arcflow-reconciler"
        )
        created = await ctx.kube.create(event)
        await ctx.writer.audit("created", created, scope, "Kubernetes Event about the drain")
    condition: dict[str, Any] = {
        "type": CONDITION_DRAINED,
        "status": want_status,
        "reason": state.reason,
        "message": state.message,
        "observedGeneration": ars.metadata.generation,
        "lastTransitionTime": (
            utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")
            if turned or current is None
            else current.last_transition_time
        ),
    }
    written = await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition], "drain": state.reason},
        scope,
        f"status: {state.reason}",
    )
    return AutoscalingRunnerSet.from_observed(written)
