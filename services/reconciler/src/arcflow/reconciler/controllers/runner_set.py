"""EphemeralRunnerSet controller (docs/upstream-behaviour.md#ers-controller): patchID-gated scaling
of EphemeralRunners.

Scale only when ``spec.patchID`` is 0 (forced) or differs from the newest runner's
``patch-id`` (a new request): a stale or duplicate listener patch changes nothing. Busy runners
are never removed; idle ones only on a forced (``patchID == 0``) scale-down: their finalizer
removes them from the service before their pod stops (ADR 0101).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from arcflow.common.builders import build_ephemeral_runner, build_runner_proxy_secret
from arcflow.common.constants import (
    ANNOTATION_INTEGRITY_HASH,
    FINALIZER_ER,
    FINALIZER_ER_REGISTRATION,
    FINALIZER_ERS,
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.hashing import ephemeral_runner_set_integrity_hash
from arcflow.common.kube import (
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    SECRET,
    ConflictError,
    NotFoundError,
    build_event,
)
from arcflow.common.models import EphemeralRunnerSet, KubeObject
from arcflow.common.naming import runner_proxy_secret_name
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, read_proxy_credentials
from arcflow.reconciler.controllers.manifest import (
    Manifest,
    annotations_of,
    finalizer_patch,
    labels_of,
    meta,
    owned_by,
)
from arcflow.reconciler.controllers.runner_claims import (
    ANNOTATION_JIT_CLAIM,
    ANNOTATION_REQUEST_OWED,
    ANNOTATION_RUNNER_CLAIM,
    RUNNER_LEASE_RENEW_SECONDS,
    RUNNER_LEASE_SECONDS,
    RUNNER_NAME_BLOCK,
    OwedRunners,
    RunnerClaim,
    in_flight_runners,
    parse_owed_runners,
    parse_runner_claim,
    runner_name,
)
from arcflow.reconciler.controllers.runner_rules import job_completed_at
from arcflow.reconciler.controllers.runner_set_capacity import (
    budget_lock,
    budgeted,
    creatable_runners,
)
from arcflow.reconciler.controllers.runner_set_rules import (
    SetRunner,
    bucket_runners,
    idle_removal_candidates,
    latest_patch_id,
    should_scale,
)
from arcflow.reconciler.keys import Result

WAIT_SECONDS = 1.0
BUSY_RECHECK_SECONDS = 5.0
REASON_SPEC_EDITED = "RunnerSpecEdited"


def scope_of(obj: KubeObject) -> Scope:
    """The audit scope of a runner set or runner: its ARS and variant, from its labels."""
    labels = obj.labels
    return Scope(
        labels.get(LABEL_SCALE_SET_NAMESPACE) or obj.namespace,
        labels.get(LABEL_SCALE_SET_NAME, ""),
        labels.get(LABEL_RUNNER_VARIANT, ""),
    )


#: How soon a set whose runners the shared capacity held back looks again (ADR 0062).
CAPACITY_RECHECK_SECONDS = 0.5


async def runners_of(ctx: Context, ers: EphemeralRunnerSet) -> list[SetRunner]:
    uid = ers.uid
    if ctx.cache is not None:
        # Read-only here (bucketed, counted, passed to deletes): the cached objects themselves.
        # A burst re-reads a set's runners after every runner change; copying them all each
        # time was a third of the reconciler's CPU (ADR 0029), and parsing them would cost
        # more (SetRunner). Never change the documents these views hold.
        cached = ctx.cache.list(EPHEMERAL_RUNNER, ers.namespace, owner_uid=uid, shared=True)
        return [SetRunner(er) for er in cached]
    listed = await ctx.kube.list(
        EPHEMERAL_RUNNER,
        namespace=ers.namespace,
        label_selector={
            LABEL_SCALE_SET_NAME: ers.labels.get(LABEL_SCALE_SET_NAME, ""),
            LABEL_SCALE_SET_NAMESPACE: ers.labels.get(LABEL_SCALE_SET_NAMESPACE, ""),
        },
    )
    return [SetRunner(er) for er in listed.items if owned_by(er, uid)]


def runner_spec_of(ers: EphemeralRunnerSet) -> dict[str, Any]:
    """The set's ``ephemeralRunnerSpec`` as the live document holds it: what its integrity
    hash is computed over (the parsed model would hash differently)."""
    spec: dict[str, Any] = (ers.manifest.get("spec") or {}).get("ephemeralRunnerSpec") or {}
    return spec


async def reconcile_runner_set(ctx: Context, ers: EphemeralRunnerSet) -> Result:
    name, namespace = ers.name, ers.namespace
    scope = scope_of(ers)
    if ers.is_deleting:
        return await _clean_up(ctx, ers, scope)
    if FINALIZER_ERS not in ers.finalizers:
        patched = await ctx.writer.patch(
            EPHEMERAL_RUNNER_SET.kind,
            name,
            namespace,
            finalizer_patch(ers, [*ers.finalizers, FINALIZER_ERS]),
            scope,
            "add the EphemeralRunnerSet finalizer",
        )
        ers = EphemeralRunnerSet.from_observed(patched)
    computed = ephemeral_runner_set_integrity_hash(runner_spec_of(ers))
    if ers.annotations.get(ANNOTATION_INTEGRITY_HASH) != computed:
        return Result.again(await _replace_for_new_spec(ctx, ers, scope, computed))
    if ers.status is not None and ers.status.phase == "Outdated":
        await _remove_runners(ctx, scope, await runners_of(ctx, ers))
        return Result.done()
    await _ensure_proxy_secret(ctx, ers, scope)

    runners = await runners_of(ctx, ers)
    buckets = bucket_runners(runners)
    patch_id = ers.spec.patch_id
    replicas = ers.spec.replicas
    # The runners that count against a scale request: pending, running and failed ones, but
    # not those whose job GitHub completed (their listener wrote it on them, ADR 0100): such a
    # runner serves no other job, and the listener's count after the completion no longer
    # includes it; counted, it would stand in for the runner a new job needs (ADR 0110).
    total = sum(
        1
        for bucket in ("pending", "running", "failed")
        for er in buckets[bucket]
        if job_completed_at(er.annotations) is None
    )
    claim = parse_runner_claim(ers.annotations)
    ers_uid = ers.uid
    ctx.stages.request_seen(ers_uid, patch_id)
    # A scale request (a patchID) is served once: later passes for the same patchID (each
    # finished runner re-queues its set) must not top up runners whose jobs are done while
    # the listener's replicas still count them. The claim remembers it across replicas and
    # restarts when runners were created; this replica also remembers the requests (patchID
    # and replicas) it evaluated without creating anything.
    memo = ctx.runner_set_state
    served = patch_id != 0 and (
        patch_id == claim.patch_id or memo.scaled_for.get(ers_uid) == (patch_id, replicas)
    )
    # A request the shared capacity held back is not served until it has created what it
    # asked for: it goes on as room frees up, with no new patchID, and never past that count
    # (ADR 0110). This replica's memory first; the set's annotation after a restart.
    short_of = memo.owed.get(ers_uid) or parse_owed_runners(ers.annotations)
    still_owed = short_of.of(patch_id, replicas) if short_of is not None else None
    live_names = {er.name for er in runners}
    # Runners claimed by an earlier pass whose create failed are owed whatever the request's
    # state: without this, a served request would never get them and their jobs would wait.
    owed = sorted(ctx.runner_set_state.uncreated.pop(ers_uid, set()) - live_names)
    if owed:
        await _create_named(ctx, ers, scope, owed, f"retry runner creation (patchID {patch_id})")
    if still_owed is not None or (should_scale(patch_id, latest_patch_id(runners)) and not served):
        for er in buckets["finished"]:
            await ctx.writer.delete(
                er.document, scope, "finished runner cleared on a new scale request"
            )
        now = ctx.tuning.clock().timestamp()
        in_flight = in_flight_runners(claim, live_names, ctx.instance, now) + len(owed)
        if total + in_flight < replicas and claim.leased_to_another(ctx.instance, now):
            # The lease holder creates this set's runners; look again when its lease ends (a
            # holder that died is taken over then). Not remembered as served.
            wait = await _update_status(ctx, ers, scope, buckets)
            return Result.again(max(wait, claim.until - now + WAIT_SECONDS))
        short = False
        if total + in_flight < replicas:
            # The set's shared capacity (ADR 0062) bounds the pods of all variants together.
            missing = replicas - total - in_flight
            if still_owed is not None:
                missing = min(missing, still_owed)
            ars = await budgeted(ctx, ers)
            if ars is None:
                await _create_runners(ctx, ers, scope, claim, missing, replicas, patch_id)
            else:  # the gate and the creates under the set's lock (ADR 0090)
                async with budget_lock(ctx, ars):
                    count = await creatable_runners(ctx, ars, ers, missing, in_flight)
                    short = count < missing
                    if count:
                        await _create_runners(ctx, ers, scope, claim, count, replicas, patch_id)
                if short and patch_id != 0:
                    await _owe(ctx, ers, scope, OwedRunners(patch_id, replicas, missing - count))
        elif patch_id == 0 and total > replicas:
            await _remove_idle(ctx, scope, buckets, total - replicas)
        if short:  # not served: the rest is created once finished runners are gone
            wait = await _update_status(ctx, ers, scope, bucket_runners(await runners_of(ctx, ers)))
            return Result.again(max(wait, CAPACITY_RECHECK_SECONDS))
        # Remembered only once the request's writes went through: a failed pass retries it.
        await _owe(ctx, ers, scope, None)
        ctx.runner_set_state.scaled_for[ers_uid] = (patch_id, replicas)
    wait = await _update_status(ctx, ers, scope, bucket_runners(await runners_of(ctx, ers)))
    return Result.again(wait) if wait else Result.done()


async def _owe(
    ctx: Context, ers: EphemeralRunnerSet, scope: Scope, owed: OwedRunners | None
) -> None:
    """Remember what the set's short request still owes (``None``: nothing), in this replica
    and, when it changed, on the set (ADR 0110)."""
    if owed is None:
        ctx.runner_set_state.owed.pop(ers.uid, None)
    else:
        ctx.runner_set_state.owed[ers.uid] = owed
    value = owed.encode() if owed is not None else None
    if ers.annotations.get(ANNOTATION_REQUEST_OWED) == value:
        return
    why = "runners the capacity still holds back" if owed else "the short request is served"
    await ctx.writer.patch(
        EPHEMERAL_RUNNER_SET.kind,
        ers.name,
        ers.namespace,
        {"metadata": {"annotations": {ANNOTATION_REQUEST_OWED: value}}},
        scope,
        why,
    )


def runner_template_hash(er: SetRunner) -> str:
    """The ERS integrity hash of the runner spec an EphemeralRunner was built from, over its
    ``spec`` as the document holds it (pure)."""
    spec = dict(er.document.get("spec") or {})
    spec.pop("proxySecretRef", None)  # set on runners only (build_ephemeral_runner)
    return ephemeral_runner_set_integrity_hash(spec)


async def _replace_for_new_spec(
    ctx: Context, ers: EphemeralRunnerSet, scope: Scope, computed: str
) -> float:
    """The runner spec was edited directly (the ARS controller writes spec and hash together):
    idle runners of the old spec are replaced with the new one at once, up to ``replicas``,
    and busy ones finish their job first (ADR 0037, docs/upstream-behaviour.md#direct-ers-edits).
    Returns the seconds to look again. Runners are told apart by the spec they were built from,
    so a pass that fails before the hash is recorded is simply done again: replacements already
    made are of the new spec and are kept."""
    runners = await runners_of(ctx, ers)
    old = [er for er in runners if runner_template_hash(er) != computed]
    await _remove_runners(ctx, scope, old)
    left = bucket_runners(await runners_of(ctx, ers))
    replicas = ers.spec.replicas
    claim = parse_runner_claim(ers.annotations)
    now = ctx.tuning.clock().timestamp()
    live_names = {er.name for er in runners}
    in_flight = in_flight_runners(claim, live_names, ctx.instance, now)
    live = len(left["pending"]) + len(left["running"]) + len(left["failed"])
    count = max(0, replicas - live - in_flight)
    if count and claim.leased_to_another(ctx.instance, now):
        # The creation lease holder replaces them (ADR 0033); look again when it ends.
        return claim.until - now + WAIT_SECONDS
    busy = sum(1 for er in old if er.has_job and not er.is_deleting)
    record = {ANNOTATION_INTEGRITY_HASH: computed}
    if count:
        # The new runners copy the hash of the spec they are built from.
        source = copy.deepcopy(ers.manifest)
        source["metadata"].setdefault("annotations", {}).update(record)
        await _create_runners(
            ctx, ers, scope, claim, count, replicas, ers.spec.patch_id, source=source
        )
    await ctx.writer.patch(
        EPHEMERAL_RUNNER_SET.kind,
        ers.name,
        ers.namespace,
        {"metadata": {"annotations": record}},
        scope,
        "runner spec edited in place: record its hash",
    )
    message = (
        f"runner spec edited directly: {count} runner(s) created with the new spec, "
        f"{busy} busy runner(s) of the old spec finish their job first"
    )
    event = build_event(ers.manifest, REASON_SPEC_EDITED, message, component="arcflow-reconciler")
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, "Kubernetes Event about a direct edit")
    return WAIT_SECONDS


async def _create_runners(
    ctx: Context,
    ers: EphemeralRunnerSet,
    scope: Scope,
    claim: RunnerClaim,
    count: int,
    replicas: int,
    patch_id: int,
    *,
    source: Manifest | None = None,
) -> None:
    """``source``: the set's manifest the runners are built from (``ers.manifest`` unless
    given)."""
    template = build_ephemeral_runner(source if source is not None else ers.manifest, ctx.build)
    generate_name = str(template["metadata"].pop("generateName"))
    uid = ers.uid
    namespace = ers.namespace
    now = ctx.tuning.clock().timestamp()
    block = ctx.runner_set_state.name_blocks.get(uid)
    if (
        block is not None
        and claim.by == ctx.instance
        and claim.next_index == block[1]
        and now < claim.until - RUNNER_LEASE_RENEW_SECONDS
        and block[1] - block[0] >= count
    ):
        # This replica's lease and block: names without a new claim (ADR 0033).
        start = block[0]
    else:
        start = claim.next_index
        reserved = max(count, RUNNER_NAME_BLOCK)
        names = tuple(runner_name(generate_name, uid, start + i) for i in range(count))
        new_claim = RunnerClaim(
            start + reserved, names, ctx.instance, now, patch_id, now + RUNNER_LEASE_SECONDS
        )
        # Conditional on the read resourceVersion: a racing replica's claim makes this one 409.
        await ctx.writer.patch(
            EPHEMERAL_RUNNER_SET.kind,
            ers.name,
            namespace,
            {
                "metadata": {
                    "annotations": {ANNOTATION_RUNNER_CLAIM: new_claim.encode()},
                    "resourceVersion": ers.resource_version,
                }
            },
            scope,
            f"claim {count} runner name(s) and the set's creation lease",
        )
        block = (start, start + reserved)
    ctx.runner_set_state.name_blocks[uid] = (start + count, block[1])
    names = tuple(runner_name(generate_name, uid, start + i) for i in range(count))
    why = f"scale up to {replicas} (patchID {patch_id})"
    await _create_named(ctx, ers, scope, names, why, template=template)


async def _create_named(
    ctx: Context,
    ers: EphemeralRunnerSet,
    scope: Scope,
    names: Sequence[str],
    why: str,
    *,
    template: Manifest | None = None,
) -> None:
    """Creates the runners ``names`` of ``ers``, a bounded number at once; an existing one
    counts as created. Names whose create failed are remembered in
    ``ctx.runner_set_state.uncreated`` (the next pass creates them) and the first error is
    raised."""
    if template is None:
        template = build_ephemeral_runner(ers.manifest, ctx.build)
        template["metadata"].pop("generateName", None)
    # Created with their finalizers and this replica's JIT claim (no patch for either
    # afterwards).
    template["metadata"]["finalizers"] = [FINALIZER_ER, FINALIZER_ER_REGISTRATION]
    annotations = template["metadata"].setdefault("annotations", {})
    annotations[ANNOTATION_JIT_CLAIM] = f"{ctx.instance}@{ctx.tuning.clock().timestamp()}"
    slots = asyncio.Semaphore(max(1, ctx.tuning.create_concurrency))

    async def create(name: str) -> None:
        manifest = copy.deepcopy(template)
        manifest["metadata"]["name"] = name
        async with slots:
            try:
                created = await ctx.writer.create(manifest, scope, why)
            except ConflictError as exc:
                if exc.already_exists:
                    return
                raise
        ctx.stages.runner_created(created, ers.uid, labels_of(created), ers.name)

    results = await asyncio.gather(*(create(n) for n in names), return_exceptions=True)
    failed = [
        (name, result)
        for name, result in zip(names, results, strict=True)
        if isinstance(result, BaseException)
    ]
    if failed:
        ctx.runner_set_state.uncreated.setdefault(ers.uid, set()).update(n for n, _ in failed)
        raise failed[0][1]


async def _remove_idle(
    ctx: Context, scope: Scope, buckets: Mapping[str, Sequence[SetRunner]], count: int
) -> None:
    """Delete ``count`` idle runners, only as they were judged idle (a runner whose status
    changed since gets a 409 and the pass runs again). Each one's finalizer removes it from
    the service, once and off the reconcile path (ADR 0101), before its pod is stopped: a
    runner GitHub handed a job meanwhile is refused removal and finishes its job first."""
    for er in idle_removal_candidates(buckets)[:count]:
        await ctx.writer.delete(er.document, scope, "scale down: idle runner", unchanged=True)


async def _update_status(
    ctx: Context, ers: EphemeralRunnerSet, scope: Scope, buckets: Mapping[str, Sequence[SetRunner]]
) -> float:
    """Write the counts (and phase) when they changed; returns the seconds to wait when a
    counts-only change was held back (at most one such write per ``status_interval``)."""
    counts = {k: len(v) for k, v in buckets.items()}
    name, namespace = ers.name, ers.namespace
    ctx.metrics.record_runner_counts(name, namespace, ers.labels, counts)
    # Compared key by key with what the status patch would write: the live document.
    status = ers.manifest.get("status") or {}
    live_phase = ers.status.phase if ers.status is not None else ""
    phase = "Outdated" if buckets["outdated"] else (live_phase or "Running")
    wanted: dict[str, Any] = {
        "currentReplicas": counts["pending"] + counts["running"] + counts["failed"],
        "pendingEphemeralRunners": counts["pending"],
        "runningEphemeralRunners": counts["running"],
        "failedEphemeralRunners": counts["failed"],
        "phase": phase,
    }
    if all(status.get(k) == v for k, v in wanted.items()):
        return 0.0
    wait = ctx.status_pacer.wait("ers", namespace, name)
    if wait > 0 and live_phase == phase:
        return wait
    await ctx.writer.patch_status(
        EPHEMERAL_RUNNER_SET.kind, name, namespace, wanted, scope, "runner counts changed"
    )
    ctx.status_pacer.sent("ers", namespace, name)
    return 0.0


async def _ensure_proxy_secret(ctx: Context, ers: EphemeralRunnerSet, scope: Scope) -> None:
    proxy = ers.spec.ephemeral_runner_spec.proxy
    if proxy is None:
        return
    credentials = await read_proxy_credentials(ctx.kube, scope.namespace, proxy)
    want = build_runner_proxy_secret(ers.manifest, credentials)
    if want is None:
        return
    name = str(meta(want)["name"])
    live = await _secret(ctx, name, str(meta(want)["namespace"]))
    if live is None:
        await ctx.writer.create(want, scope, "runner proxy settings")
        return
    if live.get("data") != want.get("data") or annotations_of(live).get(
        ANNOTATION_INTEGRITY_HASH
    ) != annotations_of(want).get(ANNOTATION_INTEGRITY_HASH):
        await ctx.writer.patch(
            "Secret",
            name,
            str(meta(want)["namespace"]),
            {"metadata": {"annotations": annotations_of(want)}, "data": want.get("data")},
            scope,
            "runner proxy settings changed",
        )


async def _remove_runners(ctx: Context, scope: Scope, runners: Sequence[SetRunner]) -> bool:
    """``cleanUpEphemeralRunners``: every runner but busy ones; True when none is left."""
    for er in runners:
        if er.is_deleting:
            continue
        if er.phase == "Running" and er.has_job:
            continue  # never kill a busy runner; the ER finalizer handles deregistration
        # Only the version judged idle: if it changed since (a job started), 409 and re-read.
        await ctx.writer.delete(er.document, scope, "EphemeralRunnerSet cleanup", unchanged=True)
    return not runners


async def _clean_up(ctx: Context, ers: EphemeralRunnerSet, scope: Scope) -> Result:
    if FINALIZER_ERS not in ers.finalizers:
        return Result.done()
    runners = await runners_of(ctx, ers)
    if not await _remove_runners(ctx, scope, runners):
        busy = any(er.has_job for er in runners)
        return Result.again(BUSY_RECHECK_SECONDS if busy else WAIT_SECONDS)
    proxy_name = runner_proxy_secret_name(ers.name, ers.namespace)
    proxy = await _secret(ctx, proxy_name, ers.namespace)
    if proxy is not None:
        await ctx.writer.delete(proxy, scope, "EphemeralRunnerSet deleted")
    await ctx.writer.patch(
        EPHEMERAL_RUNNER_SET.kind,
        ers.name,
        ers.namespace,
        finalizer_patch(ers, [f for f in ers.finalizers if f != FINALIZER_ERS]),
        scope,
        "runners gone: release the EphemeralRunnerSet",
    )
    return Result.done()


async def _secret(ctx: Context, name: str, namespace: str) -> Manifest | None:
    """A Secret we made: the cache when it holds it, else one GET (it may be unlabelled)."""
    if ctx.cache is not None:
        return await ctx.cache.get_or_read(SECRET, name, namespace)
    try:
        return await ctx.kube.get(SECRET, name, namespace)
    except NotFoundError:
        return None
