"""The AutoscalingRunnerSet's children: one EphemeralRunnerSet per variant (created, patched
behind the drain gate, or deleted with its variant) and exactly one AutoscalingListener, found
by its spec back-reference (docs/upstream-behaviour.md#ars-controller, #traps)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from arcflow.common.constants import (
    ANNOTATION_INTEGRITY_HASH,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.kube import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from arcflow.common.models import AutoscalingListener, AutoscalingRunnerSet, EphemeralRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_rules import variant_of
from arcflow.reconciler.controllers.base import Context, read_list
from arcflow.reconciler.controllers.manifest import (
    Manifest,
    annotations_of,
    contains,
    is_deleting,
    labels_of,
    merge_patch_to,
    meta,
)
from arcflow.reconciler.controllers.runner_set_rules import SetRunner, bucket_runners
from arcflow.reconciler.controllers.runner_spec_drift import (
    runner_spec_drift,
    wanted_annotations,
)


async def listeners_of(ctx: Context, namespace: str, name: str) -> list[AutoscalingListener]:
    """Every AutoscalingListener whose spec points back at this ARS
    (docs/upstream-behaviour.md#traps: not by name). Only the matches are parsed: the
    controller namespace holds one listener per ARS of the cluster (ADR 0071)."""
    listed = await read_list(ctx, AUTOSCALING_LISTENER, ctx.controller_namespace)
    return [
        AutoscalingListener.from_observed(al)
        for al in listed
        if (al.get("spec") or {}).get("autoscalingRunnerSetNamespace") == namespace
        and (al.get("spec") or {}).get("autoscalingRunnerSetName") == name
    ]


async def delete_listeners_first(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope, why: str
) -> bool:
    """Delete this ARS's listeners (they go before its runner sets, so nothing scales a set
    being removed); ``True`` while any still exists (come back later)."""
    pending = False
    for al in await listeners_of(ctx, ars.namespace, ars.name):
        pending = True
        if not al.is_deleting:
            await ctx.writer.delete(al.manifest, scope, why)
    return pending


async def runner_sets_of(ctx: Context, namespace: str, name: str) -> list[Manifest]:
    """Every EphemeralRunnerSet of this ARS, all variants, found by labels
    (docs/upstream-behaviour.md#traps), as the live documents: the convergence compares
    them key by key with the desired sets, and the status rules sum them."""
    return await read_list(
        ctx,
        EPHEMERAL_RUNNER_SET,
        namespace,
        {LABEL_SCALE_SET_NAME: name, LABEL_SCALE_SET_NAMESPACE: namespace},
    )


async def runner_set_models_of(ctx: Context, namespace: str, name: str) -> list[EphemeralRunnerSet]:
    """:func:`runner_sets_of`, parsed (one per variant), for the ARS deletion that only reads
    them."""
    return [
        EphemeralRunnerSet.from_observed(doc) for doc in await runner_sets_of(ctx, namespace, name)
    ]


async def converge_runner_sets(
    ctx: Context, ars: AutoscalingRunnerSet, desired: list[Manifest]
) -> tuple[bool, bool, list[Manifest]]:
    """Create / patch / delete the EphemeralRunnerSets; returns (waiting, draining, live)."""
    live = await runner_sets_of(ctx, ars.namespace, ars.name)
    by_name = {str(meta(e).get("name")): e for e in live}
    wanted_names = {str(meta(d)["name"]) for d in desired}
    waiting = draining = False
    result: list[Manifest] = []
    # New variants' sets are created together (an ARS of 10 variants: one round trip of
    # latency instead of ten, ADR 0040), bounded like a set's runners.
    gate = asyncio.Semaphore(ctx.tuning.create_concurrency)

    async def create(want: Manifest) -> Manifest:
        str(meta(want)["name"])
        scope = Scope(ars.namespace, ars.name, variant_of(want, ars))
        async with gate:
            return await ctx.writer.create(want, scope, "EphemeralRunnerSet of a variant")

    missing = [d for d in desired if str(meta(d)["name"]) not in by_name]
    outcomes = await asyncio.gather(*(create(d) for d in missing), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    created_by_name = {str(meta(c)["name"]): c for c in outcomes if isinstance(c, dict)}
    for want in desired:
        name = str(meta(want)["name"])
        scope = Scope(ars.namespace, ars.name, variant_of(want, ars))
        current = by_name.get(name)
        if current is None:
            result.append(created_by_name[name])
            continue
        result.append(current)
        if is_deleting(current):
            waiting = True  # a removed-then-re-added variant: wait for the old one to go
            continue
        updated, drains = await converge_one_runner_set(ctx, scope, current, want)
        draining = draining or drains
        if updated is not None:
            result[-1] = updated
    for name, current in by_name.items():
        if name in wanted_names:
            continue
        if not is_deleting(current):
            await ctx.writer.delete(
                current,
                Scope(ars.namespace, ars.name, variant_of(current, ars)),
                "variant removed from the AutoscalingRunnerSet",
            )
        waiting = True
    return waiting, draining, result


def runner_counts(ctx: Context, ers: Manifest) -> dict[str, int]:
    """The set's runners per bucket (:func:`bucket_runners`'s): counted from the cache of its
    runners when there is one (the set's status counts are written at most every
    ``status_interval``, ADR 0033), else from its status (pending, running and failed only)."""
    if ctx.cache is not None and ctx.cache.caches(EPHEMERAL_RUNNER):
        # Only read (SetRunner parses a view): the cached objects themselves, not copies. An
        # ARS pass runs at each change of its sets; copying every runner of a 600-runner burst
        # in each cost the reconciler 40 % of its CPU there (issue 31's profile).
        runners = ctx.cache.list(
            EPHEMERAL_RUNNER,
            str(meta(ers)["namespace"]),
            owner_uid=str(meta(ers).get("uid")),
            shared=True,
        )
        buckets = bucket_runners([SetRunner(er) for er in runners])
        return {bucket: len(found) for bucket, found in buckets.items()}
    status = ers.get("status") or {}
    return {
        b: int(status.get(f"{b}EphemeralRunners") or 0) for b in ("pending", "running", "failed")
    }


def active_runners(counts: Mapping[str, int]) -> int:
    """Pending and running runners."""
    return counts["pending"] + counts["running"]


def current_runners(counts: Mapping[str, int]) -> int:
    """Pending, running and failed runners: what the set's ``currentReplicas`` counts."""
    return active_runners(counts) + counts["failed"]


async def converge_one_runner_set(
    ctx: Context, scope: Scope, current: Manifest, want: Manifest
) -> tuple[Manifest | None, bool]:
    """Drift handling of one EphemeralRunnerSet; returns (patched object or None, draining)."""
    name = str(meta(current)["name"])
    current_spec = current.get("spec") or {}
    want_spec = want.get("spec") or {}
    want_hash = annotations_of(want)[ANNOTATION_INTEGRITY_HASH]
    # A direct edit of the ERS's runner spec stands until the ARS's own template changes (ADR
    # 0037); only a change of the ARS's template is patched in (after the drain gate).
    drift = runner_spec_drift(annotations_of(current), want_hash)
    spec_drift = drift.changed
    wanted = wanted_annotations(annotations_of(want), want_hash, drift)
    reregistered = spec_drift and only_scale_set_id_changed(current_spec, want_spec)
    if reregistered:
        # The registrar registered the variant's scale set again (GitHub deleted it, ADR
        # 0064): the old set's runners can take no job, so no drain. The spec is patched
        # without its integrity hash, so the ERS controller replaces the old runners at once
        # (busy ones finish first) as for a direct edit, and records the hash (ADR 0037).
        wanted.pop(ANNOTATION_INTEGRITY_HASH, None)
    elif spec_drift and active_runners(runner_counts(ctx, current)) > 0:
        # Drain gate (docs/upstream-behaviour.md#ars-controller, #traps): the listener goes (no
        # new jobs) and idle
        # runners are scaled away (patchID 0 forces it), then the spec is patched.
        if current_spec.get("replicas") or current_spec.get("patchID"):
            patched = await ctx.writer.patch(
                EPHEMERAL_RUNNER_SET.kind,
                name,
                scope.namespace,
                {"spec": {"replicas": None, "patchID": 0}},
                scope,
                "drain before a runner spec change: scale idle runners to zero",
            )
            return patched, True
        return None, True
    metadata_drift = (
        not contains(labels_of(current), labels_of(want))
        or not contains(annotations_of(current), wanted)
        or current_spec.get("ephemeralRunnerMetadata") != want_spec.get("ephemeralRunnerMetadata")
    )
    if not spec_drift and not metadata_drift:
        return None, False
    patch: dict[str, Any] = {
        "metadata": {
            "labels": labels_of(want),
            "annotations": wanted,
            "resourceVersion": meta(current).get("resourceVersion"),
        },
        "spec": {
            "ephemeralRunnerMetadata": want_spec.get("ephemeralRunnerMetadata"),
        },
    }
    if spec_drift:
        patch["spec"]["ephemeralRunnerSpec"] = merge_patch_to(
            current_spec.get("ephemeralRunnerSpec") or {}, want_spec.get("ephemeralRunnerSpec")
        )
    why = (
        "scale set registered again: new runnerScaleSetId"
        if reregistered
        else "runner spec changed"
        if spec_drift
        else "labels/annotations changed"
    )
    patched = await ctx.writer.patch(
        EPHEMERAL_RUNNER_SET.kind, name, scope.namespace, patch, scope, why
    )
    return patched, False


def only_scale_set_id_changed(current_spec: Manifest, want_spec: Manifest) -> bool:
    """The runner specs differ in ``runnerScaleSetId`` and nothing else (pure)."""
    have = dict(current_spec.get("ephemeralRunnerSpec") or {})
    want = dict(want_spec.get("ephemeralRunnerSpec") or {})
    if have.get("runnerScaleSetId") == want.get("runnerScaleSetId"):
        return False
    have.pop("runnerScaleSetId", None)
    want.pop("runnerScaleSetId", None)
    return have == want


def listener_differs(live: Manifest, want: Manifest) -> bool:
    return (
        live.get("spec") != want.get("spec")
        or labels_of(live) != labels_of(want)
        or annotations_of(live) != annotations_of(want)
    )


async def converge_listener(
    ctx: Context, ars: AutoscalingRunnerSet, want: Manifest, *, draining: bool
) -> bool:
    """Exactly one AutoscalingListener per ARS; returns whether it exists as desired."""
    scope = Scope(ars.namespace, ars.name)
    want_name = str(meta(want)["name"])
    ready = False
    for live in await listeners_of(ctx, ars.namespace, ars.name):
        name = live.name
        if live.is_deleting:
            continue
        if draining:
            why = "drain: no new jobs until the runner spec change is applied"
        elif name != want_name:
            why = "orphaned listener (runnerGroup or githubConfigUrl changed its name)"
        elif listener_differs(live.manifest, want):
            why = "listener spec, labels or annotations changed: recreate"
        else:
            ready = True
            continue
        await ctx.writer.delete(live.manifest, scope, why)
    if ready or draining:
        return ready
    if await listeners_of(ctx, ars.namespace, ars.name):
        # The old listener (maybe under another name) is still going away: never two
        # listeners, so never two message sessions for one scale set
        # (docs/upstream-behaviour.md#traps).
        return False
    await ctx.writer.create(want, scope, "the AutoscalingListener of the set")
    return True
