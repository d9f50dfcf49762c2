"""Writes ``status.effectiveMinRunners`` (ADR 0063) when it changes, and says when to look
again (the next window boundary)."""

from __future__ import annotations

from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_schedule_rules import effective_min_runners
from arcflow.reconciler.controllers.base import Context

STATUS_KEY = "effectiveMinRunners"


async def report_effective_minimums(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope
) -> float | None:
    """The effective minimum per variant in the status; seconds until the next boundary
    (``None``: no scheduled override, nothing to wait for)."""
    entries, wait = effective_min_runners(ars, ctx.tuning.clock())
    # Compared with, and written as, the status's wire form: only the keys an entry sets.
    wanted = (
        None
        if entries is None
        else [e.model_dump(by_alias=True, exclude_unset=True, mode="json") for e in entries]
    )
    current = (ars.manifest.get("status") or {}).get(STATUS_KEY)
    key = f"{ars.namespace}/{ars.name}"
    written = ctx.ars_state.effective_minimums_written
    if wanted == current:
        written[key] = wanted
        return wait
    if key in written and written[key] == wanted:
        # Written already and not read back: a schema without the field prunes it (the
        # upstream CRDs); writing it again would only loop.
        return wait
    if wanted is None and current is None:
        return wait
    await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {STATUS_KEY: wanted},
        scope,
        "status: effective minimum per variant (scheduledOverrides)"
        if wanted is not None
        else "status: no scheduledOverrides left",
    )
    written[key] = wanted
    return wait
