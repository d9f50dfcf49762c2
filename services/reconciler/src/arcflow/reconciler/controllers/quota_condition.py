"""The ``ResourceQuotaFound`` condition of an AutoscalingRunnerSet (issue 33, ADR 0084).

With ``spec.capacity.fromResourceQuota: true`` the budget is bounded by the ResourceQuotas of
the set's namespace (ADR 0062); without any, the flag changes nothing (docs/models.md). That
is said on the set: ``ResourceQuotaFound=False`` (``NoResourceQuota``) with a Warning Event
naming the namespace and what the budget is then; when a quota appears the condition turns
``True`` (``ResourceQuotaFound``) with a Normal Event. A set that never missed one gets no
condition; a set that drops the flag loses it. Written only when it changes.
"""

from __future__ import annotations

from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.conditions import (
    ars_condition,
    other_conditions,
    turn_ars_condition,
)

CONDITION_QUOTA = "ResourceQuotaFound"
REASON_QUOTA_FOUND = "ResourceQuotaFound"
REASON_NO_QUOTA = "NoResourceQuota"


def no_quota_message(ars: AutoscalingRunnerSet) -> str:
    capacity = ars.spec.capacity
    bounded = capacity is not None and (capacity.max_runners is not None or capacity.resources)
    rest = (
        "the budget is spec.capacity's maxRunners/resources alone"
        if bounded
        else "spec.capacity sets no maxRunners or resources, so the set is unbounded"
    )
    return (
        f'capacity.fromResourceQuota: namespace "{ars.namespace}" has no ResourceQuota; {rest} '
        "until one is created"
    )


async def report_resource_quota(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, *, found: bool | None
) -> AutoscalingRunnerSet:
    """``found``: whether the namespace has a ResourceQuota; ``None`` when the set does not
    take its budget from quotas."""
    current = ars_condition(ars, CONDITION_QUOTA)
    key = f"{scope.namespace}/{scope.ars}"
    if found is None:
        ctx.ars_state.quota_found_seen.pop(key, None)
        if current is None:
            return ars
        written = await ctx.writer.patch_status(
            AUTOSCALING_RUNNER_SET.kind,
            scope.ars,
            scope.namespace,
            {"conditions": other_conditions(ars, CONDITION_QUOTA)},
            scope,
            "status: no budget from quotas, ResourceQuotaFound removed",
        )
        return AutoscalingRunnerSet.from_observed(written)
    # The condition when the ARS keeps it, else what this process last said (a server with
    # the upstream CRDs prunes status conditions; the Event still goes once per change).
    seen = (
        current.status == "True" if current is not None else ctx.ars_state.quota_found_seen.get(key)
    )
    if (seen is None and found) or seen == found:
        return ars
    ctx.ars_state.quota_found_seen[key] = found
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_QUOTA,
        ok=found,
        reason=REASON_QUOTA_FOUND if found else REASON_NO_QUOTA,
        message=(
            f'namespace "{ars.namespace}" has a ResourceQuota: it bounds the budget'
            if found
            else no_quota_message(ars)
        ),
        about="the budget's ResourceQuota",
        summary="ResourceQuota found" if found else "no ResourceQuota for the budget",
    )


__all__ = ["CONDITION_QUOTA", "REASON_NO_QUOTA", "REASON_QUOTA_FOUND", "report_resource_quota"]
