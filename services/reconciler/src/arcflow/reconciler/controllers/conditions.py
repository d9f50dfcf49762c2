"""One AutoscalingRunnerSet condition turned: a Kubernetes Event where ``kubectl describe``
looks (Normal when the check passes, Warning when it fails) and the condition written into
the ARS status in place of any earlier one of its type."""

from __future__ import annotations

from typing import Any

from arcflow.common.events import utc_now
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, build_event
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, Manifest, meta


async def turn_ars_condition(
    ctx: Context,
    doc: Manifest,
    scope: Scope,
    *,
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    about: str,
    summary: str,
) -> Manifest:
    """``about`` names the Event in the audit trail, ``summary`` the status write."""
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
        "lastTransitionTime": utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    conditions = (doc.get("status") or {}).get("conditions") or []
    others = [c for c in conditions if c.get("type") != kind]
    return await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition]},
        scope,
        summary,
    )
