"""The EphemeralRunnerSet controller's capacity gate (ADR 0062): new runners of a variant
only as far as the set's ``spec.capacity`` has room for, counting every runner of every
variant that still exists (from the watch-fed cache).

The gate holds from the first second (ADR 0090): the variants of one set are reconciled
concurrently, so the gate and the creates it allows run under one lock per set
(:func:`budget_lock`), and each pass sees its siblings' runners (the writer puts what it
creates into the cache at once). Room freed by a finished runner goes to the variants of the
highest priority that still want runners: a variant takes none while one of a higher priority
waits for room."""

from __future__ import annotations

import asyncio

from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    RESOURCE_QUOTA,
)
from arcflow.common.models import (
    AutoscalingRunnerSet,
    EphemeralRunnerSet,
    InvalidManifestError,
    ResourceQuota,
)
from arcflow.reconciler.controllers.base import Context, read_list, read_observed
from arcflow.reconciler.controllers.capacity_rules import runners_creatable
from arcflow.reconciler.controllers.manifest import meta
from arcflow.reconciler.controllers.quota_rules import uses_resource_quota, with_quota_budget


def budget_lock(ctx: Context, ars: AutoscalingRunnerSet) -> asyncio.Lock:
    """The lock the capacity gate of ``ars``'s variants and their creates run under."""
    return ctx.runner_set_state.budget_locks.setdefault(
        f"{ars.namespace}/{ars.name}", asyncio.Lock()
    )


async def budgeted(ctx: Context, ers: EphemeralRunnerSet) -> AutoscalingRunnerSet | None:
    """The set's ARS when it declares a ``spec.capacity`` (a quota budget applied), else
    ``None``: the variants of a set without one create runners without the gate."""
    ars_name = ers.labels.get(LABEL_SCALE_SET_NAME, "")
    namespace = ers.labels.get(LABEL_SCALE_SET_NAMESPACE) or ers.namespace
    if not ars_name:
        return None
    doc = await read_observed(ctx, AUTOSCALING_RUNNER_SET, ars_name, namespace)
    if doc is None or "capacity" not in (doc.get("spec") or {}):
        return None
    try:
        ars = AutoscalingRunnerSet.from_observed(doc)
    except InvalidManifestError:
        return None
    if uses_resource_quota(ars):
        listed = await read_list(ctx, RESOURCE_QUOTA, namespace)
        ars = with_quota_budget(ars, [ResourceQuota.from_observed(doc) for doc in listed])
    return ars


async def creatable_runners(
    ctx: Context, ars: AutoscalingRunnerSet, ers: EphemeralRunnerSet, wanted: int, in_flight: int
) -> int:
    """``wanted``, or fewer when the set's capacity has no room for them all (call it under
    :func:`budget_lock`)."""
    if wanted <= 0:
        return wanted
    namespace = ars.namespace
    existing: dict[str, int] = {}
    waiting: dict[str, int] = {}
    siblings = await read_list(
        ctx,
        EPHEMERAL_RUNNER_SET,
        namespace,
        {LABEL_SCALE_SET_NAME: ars.name, LABEL_SCALE_SET_NAMESPACE: namespace},
    )
    for doc in siblings:
        sibling = EphemeralRunnerSet.from_observed(doc)
        if ctx.cache is not None:
            runners = ctx.cache.list(
                EPHEMERAL_RUNNER, namespace, owner_uid=sibling.uid, shared=True
            )
        else:
            listed = await ctx.kube.list(EPHEMERAL_RUNNER, namespace=namespace)
            runners = [
                er
                for er in listed.items
                if any(o.get("uid") == sibling.uid for o in meta(er).get("ownerReferences") or [])
            ]
        existing[sibling.name] = len(runners)
        waiting[sibling.name] = max(0, sibling.spec.replicas - len(runners))
    existing[ers.name] = existing.get(ers.name, 0) + in_flight
    waiting.pop(ers.name, None)
    return runners_creatable(ars, ers.name, existing, wanted, waiting)
