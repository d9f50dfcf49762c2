"""AutoscalingRunnerSet controller (docs/upstream-behaviour.md#ars-controller, #deletion-order,
#runner-variants, with the upstream traps of #traps fixed).

One pass over the parsed ARS (the adapter read and parsed it, ADR 0050): deleting -> clean up
(``ars_cleanup``); version gate; validate (invalid -> status condition + Kubernetes Event, a
terminal error, children untouched: ``ars_spec``) -> finalizer -> server CA condition -> scale
set id annotations from the registrar's KV records and the URL labels, one patch ->
outdated sets (``ars_outdated``) -> one EphemeralRunnerSet per variant and exactly one
AutoscalingListener (``ars_children``) -> status summed over the variants. What the pass
derives from the ARS alone (problems, variants, desired children) is kept per version of it
(``ars_plan``, ADR 0128).
"""

from __future__ import annotations

import logging
from typing import Any

from arcflow.common.builders import BuildError, build_autoscaling_listener
from arcflow.common.constants import FINALIZER_ARS, LABEL_VERSION
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, RESOURCE_QUOTA, NotFoundError
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet, ResourceQuota
from arcflow.common.models.autoscaling_runner_set import CapacityStatus
from arcflow.common.validation import summarize
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_children import (
    converge_listener,
    converge_runner_sets,
    current_runners,
    runner_counts,
)
from arcflow.reconciler.controllers.ars_cleanup import clean_up
from arcflow.reconciler.controllers.ars_outdated import handle_outdated
from arcflow.reconciler.controllers.ars_plan import ArsPlans
from arcflow.reconciler.controllers.ars_rules import (
    annotations_need_patch,
    id_annotations,
    is_version_allowed,
    outdated_recreate_delay,
    sum_status,
    url_labels,
)
from arcflow.reconciler.controllers.ars_schedules import report_effective_minimums
from arcflow.reconciler.controllers.ars_spec import (
    check_credentials_secret,
    delete_for_version,
    refuse_invalid,
    set_spec_condition,
)
from arcflow.reconciler.controllers.base import Context, read_list
from arcflow.reconciler.controllers.capacity_rules import capacity_status, drain_state
from arcflow.reconciler.controllers.conditions import report_drain
from arcflow.reconciler.controllers.controller_namespace import (
    NAMESPACE_RECHECK_SECONDS,
    is_missing_namespace,
    missing_message,
    report_controller_namespace,
)
from arcflow.reconciler.controllers.manifest import finalizer_patch
from arcflow.reconciler.controllers.quota_condition import report_resource_quota
from arcflow.reconciler.controllers.quota_rules import uses_resource_quota, with_quota_budget
from arcflow.reconciler.controllers.registration import check_registration
from arcflow.reconciler.controllers.server_tls import check_server_tls
from arcflow.reconciler.controllers.sessions_condition import check_sessions
from arcflow.reconciler.keys import Result

__all__ = ["is_version_allowed", "outdated_recreate_delay", "reconcile_ars"]

log = logging.getLogger(__name__)

PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
WAIT_SECONDS = 1.0
WAIT_FOR_IDS_SECONDS = 5.0


async def reconcile_ars(ctx: Context, ars: AutoscalingRunnerSet) -> Result:
    scope = Scope(ars.namespace, ars.name)
    if ars.is_deleting:
        ctx.state(ArsPlans).forget(ars.namespace, ars.name)
        return await clean_up(ctx, ars, scope)

    label_version = ars.labels.get(LABEL_VERSION, "")
    if not is_version_allowed(label_version, ctx.build.build_version):
        await delete_for_version(ctx, ars.manifest, scope, label_version)
        return Result.done()

    plans = ctx.state(ArsPlans)
    problems = plans.plan(ars).problems
    if problems:
        await refuse_invalid(ctx, ars.manifest, scope, summarize(problems))
    await set_spec_condition(ctx, ars.manifest, scope, valid=True, message="")

    if FINALIZER_ARS not in ars.finalizers:
        patched = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            ars.name,
            ars.namespace,
            finalizer_patch(ars, [*ars.finalizers, FINALIZER_ARS]),
            scope,
            "add the AutoscalingRunnerSet finalizer",
        )
        ars = AutoscalingRunnerSet.from_observed(patched)
    ars = await check_server_tls(ctx, ars, scope)

    variants = plans.plan(ars).variants
    if ctx.ids is None:
        raise RuntimeError("no scale set id source configured")
    assignments = await ctx.ids.assignments(ars.namespace, ars.name, variants)
    missing = [v for v in variants if v not in assignments]
    ars = await check_registration(ctx, ars, scope, variants, assignments)
    if missing:
        # No ids yet: say why when the reason is ours to see (the credentials Secret).
        ars = await check_credentials_secret(ctx, ars, scope)
        await _patch_status(ctx, ars, scope, phase=PHASE_PENDING, counts=None)
        return Result.again(WAIT_FOR_IDS_SECONDS)

    # Upstream writes the ids and the URL labels in the same patch at registration; so do we,
    # and only when one of them differs from what the object carries.
    wanted_annotations = id_annotations(ars, assignments)
    wanted_labels = url_labels(ars)
    if annotations_need_patch(ars.annotations, wanted_annotations) or annotations_need_patch(
        ars.labels, wanted_labels
    ):
        metadata: dict[str, Any] = {
            "annotations": wanted_annotations,
            "resourceVersion": ars.resource_version,
        }
        if wanted_labels:
            metadata["labels"] = wanted_labels
        patched = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            ars.name,
            ars.namespace,
            {"metadata": metadata},
            scope,
            "mirror the registrar's scale set ids into annotations and the URL into labels",
        )
        ars = AutoscalingRunnerSet.from_observed(patched)

    ids = {v: assignments[v].scale_set_id for v in variants}
    ars = await check_sessions(ctx, ars, scope, ids)
    try:
        desired, tuples = plans.children(ars, ids, ctx.build)
        budgeted, quotas = ars, None
        if uses_resource_quota(ars):  # ADR 0062: the quotas come from the watch-fed cache
            listed = await read_list(ctx, RESOURCE_QUOTA, ars.namespace)
            quotas = [ResourceQuota.from_observed(doc) for doc in listed]
            budgeted = with_quota_budget(ars, quotas)
        ars = await report_resource_quota(
            ctx, ars, scope, found=None if quotas is None else bool(quotas)
        )
        desired_al = build_autoscaling_listener(budgeted, desired[0], ctx.build, tuples)
    except BuildError as exc:
        await refuse_invalid(ctx, ars.manifest, scope, str(exc))

    outdated_wait = await handle_outdated(ctx, ars, scope)
    if outdated_wait is not None:
        return outdated_wait

    waiting, draining, live_docs = await converge_runner_sets(ctx, ars, desired)
    # The status rules read them through the model (the convergence compared the documents).
    live = [EphemeralRunnerSet.from_observed(doc) for doc in live_docs]
    settled = not waiting and not draining
    try:
        listener_ready = await converge_listener(ctx, ars, desired_al, draining=draining)
    except NotFoundError as exc:
        if not is_missing_namespace(exc, ctx.controller_namespace):
            raise
        log.warning("%s", missing_message(ctx.controller_namespace), extra={"ars": scope.ars})
        ars = await report_controller_namespace(ctx, ars, scope, exists=False)
        await _patch_status(ctx, ars, scope, phase=PHASE_PENDING, counts=sum_status(live))
        return Result.again(NAMESPACE_RECHECK_SECONDS)
    if listener_ready:
        ars = await report_controller_namespace(ctx, ars, scope, exists=True)

    counts = sum_status(live)
    phase = PHASE_RUNNING if settled and listener_ready else PHASE_PENDING
    # Counted from the cache: the sets' status counts are paced and can lag (ADR 0033).
    runners = {ers.name: current_runners(runner_counts(ctx, ers.manifest)) for ers in live}
    drain = drain_state(ars, live, runners)
    ars = await report_drain(ctx, ars, scope, drain)
    held = await _patch_status(
        ctx, ars, scope, phase=phase, counts=counts, capacity=capacity_status(ars, live, runners)
    )
    boundary = await report_effective_minimums(ctx, ars, scope)  # ADR 0063
    if waiting or draining or not listener_ready:
        return Result.again(WAIT_SECONDS)
    if drain is not None and not drain.drained:
        return Result.again(WAIT_SECONDS)
    later = [s for s in (held, boundary) if s]
    return Result.again(min(later)) if later else Result.done()


async def _patch_status(
    ctx: Context,
    ars: AutoscalingRunnerSet,
    scope: Scope,
    *,
    phase: str,
    counts: dict[str, int] | None,
    capacity: CapacityStatus | None = None,
) -> float:
    """Phase and summed counts; a counts-only change waits for ``status_interval`` (the
    seconds left are returned, 0 when written or unchanged)."""
    # Compared key by key with what the status patch would write: the live document.
    status = ars.manifest.get("status") or {}
    wanted: dict[str, Any] = {"phase": phase}
    if counts is not None:
        wanted.update(
            currentRunners=counts["current"],
            pendingEphemeralRunners=counts["pending"],
            runningEphemeralRunners=counts["running"],
            failedEphemeralRunners=counts["failed"],
        )
    if capacity is not None or status.get("capacity") is not None:
        # ADR 0062; None removes it. The fields that were set, as the live document holds them.
        wanted["capacity"] = (
            capacity.model_dump(by_alias=True, exclude_unset=True, mode="json")
            if capacity is not None
            else None
        )
    if all(status.get(k) == v for k, v in wanted.items()):
        return 0.0
    wait = ctx.status_pacer.wait("ars", scope.namespace, scope.ars)
    if wait > 0 and status.get("phase") == phase:
        return wait
    await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        wanted,
        scope,
        f"status: phase {phase}, counts summed over variants",
    )
    ctx.status_pacer.sent("ars", scope.namespace, scope.ars)
    return 0.0
