"""The ``status.effectiveMinRunners`` of an AutoscalingRunnerSet (ADR 0063): pure, from the
spec and a moment. The reconciler writes it and looks again at the next window boundary, so
the status is level-based and idempotent (it does not come from the listener)."""

from __future__ import annotations

from datetime import UTC, datetime

from arcflow.common.models import AutoscalingRunnerSet, EffectiveMinRunners
from arcflow.common.schedules import (
    ScheduleError,
    effective_minimum,
    format_time,
    parse_resolved,
    resolved_overrides,
)

#: Re-check a moment after a boundary, so the window has opened (or closed) by then.
BOUNDARY_MARGIN_SECONDS = 0.05


def effective_min_runners(
    ars: AutoscalingRunnerSet, now: datetime
) -> tuple[list[EffectiveMinRunners] | None, float | None]:
    """``(status entries, seconds until the next boundary)``; ``(None, None)`` for a set
    without scheduledOverrides (its status stays as it always was). An entry sets
    ``override`` and ``nextChange`` only when it has one (its wire form omits them)."""
    resolved = resolved_overrides(ars.manifest.get("spec") or {})
    if not resolved:
        return None, None
    entries: list[EffectiveMinRunners] = []
    boundaries: list[datetime] = []
    for variant in ars.spec.effective_variants():
        try:
            overrides = parse_resolved(resolved.get(variant.name))
        except ScheduleError:
            return None, None  # validation refuses the spec before this is reached
        found = effective_minimum(variant.min_runners, variant.max_runners, overrides, now)
        entry = EffectiveMinRunners(variant=variant.name, min_runners=found.min_runners)
        if found.override:
            entry.override = found.override
        if found.next_change is not None:
            boundaries.append(found.next_change)
            entry.next_change = format_time(found.next_change.astimezone(UTC))
        entries.append(entry)
    wait = (
        max(0.0, (min(boundaries) - now).total_seconds()) + BOUNDARY_MARGIN_SECONDS
        if boundaries
        else None
    )
    return entries, wait
