"""Outdated runners (docs/upstream-behaviour.md#ars-controller, #traps): an ``Outdated``
EphemeralRunnerSet (a runner exited with the deprecated-version code) makes the ARS delete the
listener, then that set; the normal pass recreates both, behind a per-variant loop guard."""

from __future__ import annotations

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, build_event
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_children import delete_listeners_first, runner_sets_of
from arcflow.reconciler.controllers.ars_rules import (
    ANNOTATION_OUTDATED_RECREATIONS,
    OutdatedRecord,
    encode_outdated_records,
    outdated_records,
    outdated_recreate_delay,
    variant_of,
)
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.manifest import is_deleting
from arcflow.reconciler.keys import Result

REASON_OUTDATED = "RunnerImageOutdated"
PHASE_OUTDATED = "Outdated"
WAIT_SECONDS = 1.0


async def handle_outdated(ctx: Context, ars: AutoscalingRunnerSet, scope: Scope) -> Result | None:
    """docs/upstream-behaviour.md#ars-controller / #traps: an ``Outdated`` ERS (a runner exited 7)
    makes the ARS delete the
    listener, then that ERS; the normal pass recreates both. Loop guard: each recreation is
    counted per variant in an annotation and announced by a Warning Event; a set that is
    outdated again waits ``outdated_recreate_delay`` (doubling) before the next one. Returns a
    Result while it is deleting (the caller stops), else ``None``."""
    # Every pass looks, so only the outdated sets are parsed (88 variants: 88 models a pass).
    outdated = [
        EphemeralRunnerSet.from_observed(doc)
        for doc in await runner_sets_of(ctx, ars.namespace, ars.name)
        if not is_deleting(doc) and (doc.get("status") or {}).get("phase") == PHASE_OUTDATED
    ]
    if not outdated:
        return None
    records = outdated_records(ars.annotations)
    current = ars  # as last written: the next conditional patch carries its version
    now = ctx.tuning.clock()
    acting: list[EphemeralRunnerSet] = []
    wait: float | None = None
    for ers in outdated:
        variant = variant_of(ers, ars) or "_"
        record = records.get(variant) or OutdatedRecord()
        uid = ers.uid
        if record.uid == uid:
            acting.append(ers)  # this attempt is already counted: carry on deleting
            continue
        attempts, last = record.count, record.last
        if now.timestamp() - last > 2 * ctx.tuning.outdated_backoff_cap:
            attempts = 0  # long healthy since: start over
        remaining = (
            last
            + outdated_recreate_delay(
                attempts, ctx.tuning.outdated_backoff_base, ctx.tuning.outdated_backoff_cap
            )
            - now.timestamp()
        )
        if remaining > 0:
            wait = remaining if wait is None else min(wait, remaining)
            continue
        records[variant] = OutdatedRecord(attempts + 1, now.timestamp(), uid)
        next_delay = outdated_recreate_delay(
            attempts + 1, ctx.tuning.outdated_backoff_base, ctx.tuning.outdated_backoff_cap
        )
        message = (
            f"EphemeralRunnerSet {ers.name} is Outdated (a runner exited with the "
            f"deprecated-version code): recreating the listener and the set, attempt "
            f"{attempts + 1}; a further recreation waits "
            f"{next_delay:.0f}s"
        )
        guard = encode_outdated_records(records)
        written = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            ars.name,
            ars.namespace,
            {
                "metadata": {
                    "annotations": {ANNOTATION_OUTDATED_RECREATIONS: guard},
                    "resourceVersion": current.resource_version,
                }
            },
            scope,
            "count an outdated-runner recreation (loop guard)",
        )
        current = AutoscalingRunnerSet.from_observed(written)
        event = build_event(
            written, REASON_OUTDATED, message, type="Warning", component="arcflow-reconciler"
        )
        created = await ctx.kube.create(event)
        await ctx.writer.audit("created", created, scope, "Kubernetes Event: outdated runners")
        acting.append(ers)
    if not acting:
        return Result.again(wait) if wait is not None else None
    if await delete_listeners_first(ctx, ars, scope, "runners are outdated: listener first"):
        return Result.again(WAIT_SECONDS)
    for ers in acting:
        variant_scope = Scope(ars.namespace, ars.name, variant_of(ers, ars))
        await ctx.writer.delete(
            ers.manifest, variant_scope, "runners are outdated: recreate the set"
        )
    return Result.again(WAIT_SECONDS)
