"""One AutoscalingRunnerSet condition turned: a Kubernetes Event where ``kubectl describe``
looks (Normal when the check passes, Warning when it fails) and the condition written into
the ARS status in place of any earlier one of its type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from arcflow.common.events import utc_now
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, build_event
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.manifest import Manifest, meta


def conditions_of(doc: Manifest) -> list[dict[str, Any]]:
    """``status.conditions`` of an ARS manifest (conditions are not part of its model: they
    are kept as the live document holds them, so a status patch rewrites them unchanged)."""
    return list((doc.get("status") or {}).get("conditions") or [])


def condition_of(doc: Manifest, kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions_of(doc) if c.get("type") == kind), None)


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
        "observedGeneration": meta(doc).get("generation"),
        "lastTransitionTime": (since or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    others = [c for c in conditions_of(doc) if c.get("type") != kind]
    written = await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition]},
        scope,
        summary,
    )
    return AutoscalingRunnerSet.from_observed(written)
