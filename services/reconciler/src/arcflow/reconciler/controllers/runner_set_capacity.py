"""The EphemeralRunnerSet controller's capacity gate (ADR 0062): new runners of a variant
only as far as the set's ``spec.capacity`` has room for, counting every runner of every
variant that still exists (from the watch-fed cache)."""

from __future__ import annotations

from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    RESOURCE_QUOTA,
)
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet, InvalidManifestError
from arcflow.reconciler.controllers.base import Context, read_list, read_observed
from arcflow.reconciler.controllers.capacity_rules import runners_creatable
from arcflow.reconciler.controllers.manifest import meta
from arcflow.reconciler.controllers.quota_rules import uses_resource_quota, with_quota_budget


async def creatable_runners(
    ctx: Context, ers: EphemeralRunnerSet, wanted: int, in_flight: int
) -> int:
    """``wanted``, or fewer when the set's capacity has no room for them all."""
    ars_name = ers.labels.get(LABEL_SCALE_SET_NAME, "")
    namespace = ers.labels.get(LABEL_SCALE_SET_NAMESPACE) or ers.namespace
    if not ars_name or wanted <= 0:
        return wanted
    doc = await read_observed(ctx, AUTOSCALING_RUNNER_SET, ars_name, namespace)
    if doc is None or "capacity" not in (doc.get("spec") or {}):
        return wanted
    try:
        ars = AutoscalingRunnerSet.from_observed(doc)
    except InvalidManifestError:
        return wanted
    if uses_resource_quota(ars):
        ars = with_quota_budget(ars, await read_list(ctx, RESOURCE_QUOTA, namespace))
    existing: dict[str, int] = {}
    siblings = await read_list(
        ctx,
        EPHEMERAL_RUNNER_SET,
        namespace,
        {LABEL_SCALE_SET_NAME: ars_name, LABEL_SCALE_SET_NAMESPACE: namespace},
    )
    for sibling in siblings:
        uid = str(meta(sibling).get("uid", ""))
        name = str(meta(sibling).get("name", ""))
        if ctx.cache is not None:
            runners = ctx.cache.list(EPHEMERAL_RUNNER, namespace, owner_uid=uid, shared=True)
        else:
            listed = await ctx.kube.list(EPHEMERAL_RUNNER, namespace=namespace)
            runners = [
                er
                for er in listed.items
                if any(o.get("uid") == uid for o in meta(er).get("ownerReferences") or [])
            ]
        existing[name] = len(runners)
    existing[ers.name] = existing.get(ers.name, 0) + in_flight
    return runners_creatable(ars, ers.name, existing, wanted)
