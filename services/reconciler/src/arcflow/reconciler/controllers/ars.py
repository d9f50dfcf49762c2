"""AutoscalingRunnerSet controller (docs/upstream-behaviour.md#ars-controller, #deletion-order,
#runner-variants, with the upstream traps of #traps fixed).

One pass: validate (invalid -> status condition + Kubernetes Event, children untouched) ->
finalizer -> scale set id annotations from the registrar's KV records -> one
EphemeralRunnerSet per variant (create / drain-gated drift patch / orphan delete) -> exactly
one AutoscalingListener, found by its spec back-reference -> status summed over the variants.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from arcflow.common.builders import (
    BuildError,
    build_autoscaling_listener,
    desired_runner_sets,
    encode_scale_set_ids,
    listener_scale_sets,
)
from arcflow.common.constants import (
    ANNOTATION_CLEANUP_PREFIX,
    ANNOTATION_INTEGRITY_HASH,
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_SCALE_SET_ID,
    ANNOTATION_SCALE_SET_IDS,
    ANNOTATION_SCALE_SET_NAME,
    FINALIZER_ARS,
    FINALIZER_CLEANUP_PROTECTION,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LABEL_VERSION,
)
from arcflow.common.events import utc_now
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    SECRET,
    ForbiddenError,
    NotFoundError,
    build_event,
)
from arcflow.common.models import AutoscalingRunnerSet, is_multi_variant
from arcflow.common.validation import summarize, validate_manifest
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import (
    Context,
    Manifest,
    annotations_of,
    contains,
    finalizer_patch,
    finalizers_of,
    get_or_none,
    is_deleting,
    labels_of,
    merge_patch_to,
    meta,
    read,
    read_list,
)
from arcflow.reconciler.controllers.conditions import turn_ars_condition
from arcflow.reconciler.controllers.runner_set import bucket_runners
from arcflow.reconciler.controllers.runner_spec_drift import (
    runner_spec_drift,
    wanted_annotations,
)
from arcflow.reconciler.controllers.server_tls import check_server_tls
from arcflow.reconciler.scalesets import ScaleSetAssignment
from arcflow.reconciler.workqueue import Key, Result

CONDITION_SPEC_VALID = "SpecValid"
CONDITION_CREDENTIALS = "GitHubCredentialsFound"
REASON_SECRET_MISSING = "GitHubSecretNotFound"
REASON_SECRET_FOUND = "GitHubSecretFound"
REASON_INVALID = "InvalidSpec"
REASON_VALID = "Valid"
PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
WAIT_SECONDS = 1.0
WAIT_FOR_IDS_SECONDS = 5.0

REASON_VERSION = "VersionNotAllowed"
REASON_OUTDATED = "RunnerImageOutdated"
PHASE_OUTDATED = "Outdated"
# Per variant: how often its outdated ERS was recreated, the last time, and which ERS (uid)
# that attempt was about; the loop guard of docs/upstream-behaviour.md#traps.
ANNOTATION_OUTDATED_RECREATIONS = "arcflow.io/outdated-recreations"

_SEMVER = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def is_version_allowed(resource_version: str, build_version: str) -> bool:
    """docs/upstream-behaviour.md#ars-controller (pure): ``dev`` and ``canary-*`` builds allow
    anything; else the label must
    equal the build or share its semver major.minor. No or garbage label: not allowed."""
    if build_version == "dev" or build_version.startswith("canary-"):
        return True
    if resource_version == build_version:
        return True
    resource = _SEMVER.match(resource_version)
    build = _SEMVER.match(build_version)
    if resource is None or build is None:
        return False
    return resource.group(1, 2) == build.group(1, 2)


def outdated_recreate_delay(attempts: int, base: float, cap: float) -> float:
    """Wait before recreating an outdated set again: 0 the first time, then base doubling."""
    if attempts <= 0:
        return 0.0
    return float(min(cap, base * (2 ** min(attempts - 1, 30))))


def outdated_records(doc: Manifest) -> dict[str, dict[str, Any]]:
    raw = annotations_of(doc).get(ANNOTATION_OUTDATED_RECREATIONS)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# cleanup-* annotation suffix -> kind of the Helm-created object it names
# (docs/upstream-behaviour.md#deletion-order order).
_HELM_DEPENDENTS = (
    ("kubernetes-mode-role-binding-name", "RoleBinding"),
    ("kubernetes-mode-role-name", "Role"),
    ("kubernetes-mode-service-account-name", "ServiceAccount"),
    ("no-permission-service-account-name", "ServiceAccount"),
    ("github-secret-name", "Secret"),
    ("manager-role-binding", "RoleBinding"),
    ("manager-role-name", "Role"),
)


def id_annotations(
    ars: AutoscalingRunnerSet, assignments: dict[str, ScaleSetAssignment]
) -> dict[str, str | None]:
    """ARS annotations mirroring the registrar's ids (``None`` = remove the key).

    The scalar keys carry the default variant, or in variant mode the *first* variant (as
    upstream mirrors it); the JSON map exists only in variant mode.
    """
    variants = ars.spec.effective_variants()
    first = assignments[variants[0].name]
    wanted: dict[str, str | None] = {
        ANNOTATION_SCALE_SET_ID: str(first.scale_set_id),
        ANNOTATION_SCALE_SET_NAME: first.scale_set_name,
        ANNOTATION_RUNNER_GROUP_NAME: first.runner_group_name,
    }
    if is_multi_variant(ars.spec):
        wanted[ANNOTATION_SCALE_SET_IDS] = encode_scale_set_ids(
            {v.name: assignments[v.name].scale_set_id for v in variants}
        )
    else:
        wanted[ANNOTATION_SCALE_SET_IDS] = None
    return wanted


def annotations_need_patch(current: dict[str, str], wanted: dict[str, str | None]) -> bool:
    return any(current.get(k) != v for k, v in wanted.items())


def sum_status(runner_sets: list[Manifest]) -> dict[str, int]:
    """The ARS counts: each EphemeralRunnerSet's status summed over the variants."""
    total = {"current": 0, "pending": 0, "running": 0, "failed": 0}
    for ers in runner_sets:
        status = ers.get("status") or {}
        total["current"] += int(status.get("currentReplicas") or 0)
        total["pending"] += int(status.get("pendingEphemeralRunners") or 0)
        total["running"] += int(status.get("runningEphemeralRunners") or 0)
        total["failed"] += int(status.get("failedEphemeralRunners") or 0)
    return total


def variant_of(ers: Manifest, ars: AutoscalingRunnerSet) -> str:
    name = str(meta(ers).get("name", ""))
    prefix = f"{ars.name}-"
    return name[len(prefix) :] if name.startswith(prefix) else ""


async def listeners_of(ctx: Context, namespace: str, name: str) -> list[Manifest]:
    """Every AutoscalingListener whose spec points back at this ARS
    (docs/upstream-behaviour.md#traps: not by name)."""
    listed = await read_list(ctx, AUTOSCALING_LISTENER, ctx.controller_namespace)
    return [
        al
        for al in listed
        if (al.get("spec") or {}).get("autoscalingRunnerSetNamespace") == namespace
        and (al.get("spec") or {}).get("autoscalingRunnerSetName") == name
    ]


async def runner_sets_of(ctx: Context, namespace: str, name: str) -> list[Manifest]:
    """Every EphemeralRunnerSet of this ARS, all variants, found by labels
    (docs/upstream-behaviour.md#traps)."""
    return await read_list(
        ctx,
        EPHEMERAL_RUNNER_SET,
        namespace,
        {LABEL_SCALE_SET_NAME: name, LABEL_SCALE_SET_NAMESPACE: namespace},
    )


async def reconcile_ars(ctx: Context, key: Key) -> Result:
    found = await read(ctx, AUTOSCALING_RUNNER_SET, key.name, key.namespace)
    if found is None:
        return Result.done()
    doc = found
    scope = Scope(key.namespace, key.name)
    if is_deleting(doc):
        return await _clean_up(ctx, doc, scope)

    label_version = labels_of(doc).get(LABEL_VERSION, "")
    if not is_version_allowed(label_version, ctx.build.build_version):
        await _delete_for_version(ctx, doc, scope, label_version)
        return Result.done()

    problems = validate_manifest(doc)
    if problems:
        message = summarize(problems)
        await _set_spec_condition(ctx, doc, scope, valid=False, message=message)
        return Result.done()
    await _set_spec_condition(ctx, doc, scope, valid=True, message="")

    if FINALIZER_ARS not in finalizers_of(doc):
        doc = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            key.name,
            key.namespace,
            finalizer_patch(doc, [*finalizers_of(doc), FINALIZER_ARS]),
            scope,
            "add the AutoscalingRunnerSet finalizer",
        )
    doc = await check_server_tls(ctx, doc, scope)
    ars = AutoscalingRunnerSet.from_manifest(doc)

    variants = [v.name for v in ars.spec.effective_variants()]
    if ctx.ids is None:
        raise RuntimeError("no scale set id source configured")
    assignments = await ctx.ids.assignments(key.namespace, key.name, variants)
    missing = [v for v in variants if v not in assignments]
    if missing:
        # No ids yet: say why when the reason is ours to see (the credentials Secret).
        doc = await _check_credentials_secret(ctx, doc, ars, scope)
        await _patch_status(ctx, doc, scope, phase=PHASE_PENDING, counts=None)
        return Result.again(WAIT_FOR_IDS_SECONDS)

    wanted_annotations = id_annotations(ars, assignments)
    if annotations_need_patch(annotations_of(doc), wanted_annotations):
        doc = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            key.name,
            key.namespace,
            {
                "metadata": {
                    "annotations": wanted_annotations,
                    "resourceVersion": meta(doc).get("resourceVersion"),
                }
            },
            scope,
            "mirror the registrar's scale set ids into annotations",
        )
        ars = AutoscalingRunnerSet.from_manifest(doc)

    ids = {v: assignments[v].scale_set_id for v in variants}
    try:
        desired = desired_runner_sets(ars, ids, ctx.build)
        tuples = listener_scale_sets(ars, ids)
        desired_al = build_autoscaling_listener(ars, desired[0], ctx.build, tuples)
    except BuildError as exc:
        await _set_spec_condition(ctx, doc, scope, valid=False, message=str(exc))
        return Result.done()

    outdated_wait = await _handle_outdated(ctx, doc, ars, scope)
    if outdated_wait is not None:
        return outdated_wait

    waiting, draining, live = await _converge_runner_sets(ctx, ars, desired)
    settled = not waiting and not draining
    listener_ready = await _converge_listener(ctx, ars, desired_al, draining=draining)

    counts = sum_status(live)
    phase = PHASE_RUNNING if settled and listener_ready else PHASE_PENDING
    held = await _patch_status(ctx, doc, scope, phase=phase, counts=counts)
    if waiting or draining or not listener_ready:
        return Result.again(WAIT_SECONDS)
    return Result.again(held) if held else Result.done()


async def _delete_for_version(
    ctx: Context, doc: Manifest, scope: Scope, label_version: str
) -> None:
    """Upstream deletes an ARS of another chart version outright: say why first."""
    why = (
        f"label {LABEL_VERSION}={label_version or '<missing>'} is not allowed by the reconciler "
        f"build {ctx.build.build_version} (needs the same major.minor): deleting the "
        "AutoscalingRunnerSet"
    )
    event = build_event(doc, REASON_VERSION, why, type="Warning", component="arcflow-reconciler")
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, "Kubernetes Event about the version gate")
    await ctx.writer.delete(doc, scope, why)


async def _handle_outdated(
    ctx: Context, doc: Manifest, ars: AutoscalingRunnerSet, scope: Scope
) -> Result | None:
    """docs/upstream-behaviour.md#ars-controller / #traps: an ``Outdated`` ERS (a runner exited 7)
    makes the ARS delete the
    listener, then that ERS; the normal pass recreates both. Loop guard: each recreation is
    counted per variant in an annotation and announced by a Warning Event; a set that is
    outdated again waits ``outdated_recreate_delay`` (doubling) before the next one. Returns a
    Result while it is deleting (the caller stops), else ``None``."""
    live = await runner_sets_of(ctx, ars.namespace, ars.name)
    outdated = [
        e
        for e in live
        if not is_deleting(e) and (e.get("status") or {}).get("phase") == PHASE_OUTDATED
    ]
    if not outdated:
        return None
    records = outdated_records(doc)
    now = ctx.clock()
    acting: list[Manifest] = []
    wait: float | None = None
    for ers in outdated:
        variant = variant_of(ers, ars) or "_"
        record = records.get(variant) or {}
        uid = str(meta(ers).get("uid"))
        if record.get("uid") == uid:
            acting.append(ers)  # this attempt is already counted: carry on deleting
            continue
        attempts = int(record.get("count") or 0)
        last = float(record.get("last") or 0)
        if now.timestamp() - last > 2 * ctx.outdated_backoff_cap:
            attempts = 0  # long healthy since: start over
        remaining = (
            last
            + outdated_recreate_delay(attempts, ctx.outdated_backoff_base, ctx.outdated_backoff_cap)
            - now.timestamp()
        )
        if remaining > 0:
            wait = remaining if wait is None else min(wait, remaining)
            continue
        records[variant] = {"count": attempts + 1, "last": now.timestamp(), "uid": uid}
        next_delay = outdated_recreate_delay(
            attempts + 1, ctx.outdated_backoff_base, ctx.outdated_backoff_cap
        )
        message = (
            f"EphemeralRunnerSet {meta(ers).get('name')} is Outdated (a runner exited with the "
            f"deprecated-version code): recreating the listener and the set, attempt "
            f"{attempts + 1}; a further recreation waits "
            f"{next_delay:.0f}s"
        )
        doc = await ctx.writer.patch(
            AUTOSCALING_RUNNER_SET.kind,
            ars.name,
            ars.namespace,
            {
                "metadata": {
                    "annotations": {ANNOTATION_OUTDATED_RECREATIONS: json.dumps(records)},
                    "resourceVersion": meta(doc).get("resourceVersion"),
                }
            },
            scope,
            "count an outdated-runner recreation (loop guard)",
        )
        event = build_event(
            doc, REASON_OUTDATED, message, type="Warning", component="arcflow-reconciler"
        )
        created = await ctx.kube.create(event)
        await ctx.writer.audit("created", created, scope, "Kubernetes Event: outdated runners")
        acting.append(ers)
    if not acting:
        return Result.again(wait) if wait is not None else None
    pending = False
    for al in await listeners_of(ctx, ars.namespace, ars.name):
        pending = True
        if not is_deleting(al):
            await ctx.writer.delete(al, scope, "runners are outdated: listener first")
            ctx.enqueue(Key("al", str(meta(al).get("namespace")), str(meta(al).get("name"))))
    if pending:
        return Result.again(WAIT_SECONDS)
    for ers in acting:
        variant_scope = Scope(ars.namespace, ars.name, variant_of(ers, ars))
        await ctx.writer.delete(ers, variant_scope, "runners are outdated: recreate the set")
        ctx.enqueue(Key("ers", ars.namespace, str(meta(ers).get("name"))))
    return Result.again(WAIT_SECONDS)


async def _converge_runner_sets(
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
    gate = asyncio.Semaphore(ctx.create_concurrency)

    async def create(want: Manifest) -> Manifest:
        name = str(meta(want)["name"])
        scope = Scope(ars.namespace, ars.name, variant_of(want, ars))
        async with gate:
            created = await ctx.writer.create(want, scope, "EphemeralRunnerSet of a variant")
        ctx.enqueue(Key("ers", ars.namespace, name))
        return created

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
        updated, drains = await _converge_one_runner_set(ctx, scope, current, want)
        draining = draining or drains
        if updated is not None:
            result[-1] = updated
            ctx.enqueue(Key("ers", ars.namespace, name))
    for name, current in by_name.items():
        if name in wanted_names:
            continue
        if not is_deleting(current):
            await ctx.writer.delete(
                current,
                Scope(ars.namespace, ars.name, variant_of(current, ars)),
                "variant removed from the AutoscalingRunnerSet",
            )
            ctx.enqueue(Key("ers", ars.namespace, name))
        waiting = True
    return waiting, draining, result


def _active_runners(ctx: Context, ers: Manifest) -> int:
    """Pending and running runners of a set: counted from the cache of its runners when there
    is one (the set's status counts are written at most every ``status_interval``, ADR 0033),
    else from its status."""
    if ctx.cache is not None and ctx.cache.caches(EPHEMERAL_RUNNER):
        runners = ctx.cache.list(
            EPHEMERAL_RUNNER, str(meta(ers)["namespace"]), owner_uid=str(meta(ers).get("uid"))
        )
        buckets = bucket_runners(runners)
        return len(buckets["pending"]) + len(buckets["running"])
    status = ers.get("status") or {}
    return int(status.get("runningEphemeralRunners") or 0) + int(
        status.get("pendingEphemeralRunners") or 0
    )


async def _converge_one_runner_set(
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
    if spec_drift and _active_runners(ctx, current) > 0:
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
    why = "runner spec changed" if spec_drift else "labels/annotations changed"
    patched = await ctx.writer.patch(
        EPHEMERAL_RUNNER_SET.kind, name, scope.namespace, patch, scope, why
    )
    return patched, False


def _listener_differs(live: Manifest, want: Manifest) -> bool:
    return (
        live.get("spec") != want.get("spec")
        or labels_of(live) != labels_of(want)
        or annotations_of(live) != annotations_of(want)
    )


async def _converge_listener(
    ctx: Context, ars: AutoscalingRunnerSet, want: Manifest, *, draining: bool
) -> bool:
    """Exactly one AutoscalingListener per ARS; returns whether it exists as desired."""
    scope = Scope(ars.namespace, ars.name)
    want_name = str(meta(want)["name"])
    ready = False
    for live in await listeners_of(ctx, ars.namespace, ars.name):
        name = str(meta(live).get("name"))
        if is_deleting(live):
            continue
        if draining:
            why = "drain: no new jobs until the runner spec change is applied"
        elif name != want_name:
            why = "orphaned listener (runnerGroup or githubConfigUrl changed its name)"
        elif _listener_differs(live, want):
            why = "listener spec, labels or annotations changed: recreate"
        else:
            ready = True
            continue
        await ctx.writer.delete(live, scope, why)
        ctx.enqueue(Key("al", str(meta(live).get("namespace")), name))
    if ready or draining:
        return ready
    if await listeners_of(ctx, ars.namespace, ars.name):
        # The old listener (maybe under another name) is still going away: never two
        # listeners, so never two message sessions for one scale set
        # (docs/upstream-behaviour.md#traps).
        return False
    await ctx.writer.create(want, scope, "the AutoscalingListener of the set")
    ctx.enqueue(Key("al", ctx.controller_namespace, want_name))
    return True


async def _patch_status(
    ctx: Context, doc: Manifest, scope: Scope, *, phase: str, counts: dict[str, int] | None
) -> float:
    """Phase and summed counts; a counts-only change waits for ``status_interval`` (the
    seconds left are returned, 0 when written or unchanged)."""
    status = doc.get("status") or {}
    wanted: dict[str, Any] = {"phase": phase}
    if counts is not None:
        wanted.update(
            currentRunners=counts["current"],
            pendingEphemeralRunners=counts["pending"],
            runningEphemeralRunners=counts["running"],
            failedEphemeralRunners=counts["failed"],
        )
    if all(status.get(k) == v for k, v in wanted.items()):
        return 0.0
    wait = ctx.status_wait("ars", scope.namespace, scope.ars)
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
    ctx.status_sent("ars", scope.namespace, scope.ars)
    return 0.0


async def _set_spec_condition(
    ctx: Context, doc: Manifest, scope: Scope, *, valid: bool, message: str
) -> None:
    """Keep the ``SpecValid`` condition current; an Event only when it turns (in)valid."""
    status = doc.get("status") or {}
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == CONDITION_SPEC_VALID), None)
    want_status = "True" if valid else "False"
    if valid and current is None:
        return  # never invalid: no condition to clear
    if (
        current is not None
        and current.get("status") == want_status
        and (valid or current.get("message") == message)
    ):
        return
    condition = {
        "type": CONDITION_SPEC_VALID,
        "status": want_status,
        "reason": REASON_VALID if valid else REASON_INVALID,
        "message": message,
        "observedGeneration": meta(doc).get("generation"),
        "lastTransitionTime": utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    others = [c for c in conditions if c.get("type") != CONDITION_SPEC_VALID]
    # The Event first, then the condition: whoever sees the condition finds the Event too.
    event = build_event(
        doc,
        REASON_VALID if valid else REASON_INVALID,
        "spec is valid" if valid else f"spec is invalid, nothing is created: {message}",
        type="Normal" if valid else "Warning",
        component="arcflow-reconciler",
    )
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, "Kubernetes Event about the spec")
    await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition]},
        scope,
        "spec is valid again" if valid else "spec is invalid",
    )


async def _check_credentials_secret(
    ctx: Context, doc: Manifest, ars: AutoscalingRunnerSet, scope: Scope
) -> Manifest:
    """A missing ``githubConfigSecret`` stops registration: a False condition and a Warning
    Event say so where ``kubectl describe`` looks (the registrar reports it on ``arc.errors``).
    One GET, only while the scale set ids are missing."""
    name = ars.spec.github_config_secret
    if ctx.cache is not None:
        secret = await ctx.cache.get_or_read(SECRET, name, scope.namespace)
    else:
        secret = await get_or_none(ctx.kube, SECRET, name, scope.namespace)
    conditions = list((doc.get("status") or {}).get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == CONDITION_CREDENTIALS), None)
    found = secret is not None
    if current is None and found:
        return doc
    if current is not None and (current.get("status") == "True") == found:
        return doc
    message = (
        f"Secret {scope.namespace}/{name} (spec.githubConfigSecret) found"
        if found
        else f"Secret {scope.namespace}/{name} (spec.githubConfigSecret) not found: no "
        "runner scale set can be registered until it exists"
    )
    return await turn_ars_condition(
        ctx,
        doc,
        scope,
        kind=CONDITION_CREDENTIALS,
        ok=found,
        reason=REASON_SECRET_FOUND if found else REASON_SECRET_MISSING,
        message=message,
        about="the credentials",
        summary="credentials Secret found" if found else "credentials Secret missing",
    )


async def _clean_up(ctx: Context, doc: Manifest, scope: Scope) -> Result:
    """Deletion order (docs/upstream-behaviour.md#deletion-order): listener, then every variant's
    ERS, then Helm dependents'
    finalizers, then ours. Scale sets are the registrar's to delete."""
    if FINALIZER_ARS not in finalizers_of(doc):
        return Result.done()
    pending = False
    for al in await listeners_of(ctx, scope.namespace, scope.ars):
        pending = True
        if not is_deleting(al):
            await ctx.writer.delete(al, scope, "AutoscalingRunnerSet deleted: listener first")
            ctx.enqueue(Key("al", str(meta(al).get("namespace")), str(meta(al).get("name"))))
    if pending:
        return Result.again(WAIT_SECONDS)
    for ers in await runner_sets_of(ctx, scope.namespace, scope.ars):
        pending = True
        if not is_deleting(ers):
            await ctx.writer.delete(ers, scope, "AutoscalingRunnerSet deleted")
        ctx.enqueue(Key("ers", scope.namespace, str(meta(ers).get("name"))))
    if pending:
        return Result.again(WAIT_SECONDS)
    await _release_helm_dependents(ctx, doc, scope)
    await ctx.writer.patch(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        finalizer_patch(doc, [f for f in finalizers_of(doc) if f != FINALIZER_ARS]),
        scope,
        "children gone: release the AutoscalingRunnerSet",
    )
    return Result.done()


async def _release_helm_dependents(ctx: Context, doc: Manifest, scope: Scope) -> None:
    annotations = annotations_of(doc)
    for suffix, kind in _HELM_DEPENDENTS:
        name = annotations.get(f"{ANNOTATION_CLEANUP_PREFIX}{suffix}")
        if not name:
            continue
        try:
            obj = await ctx.kube.get(kind, name, scope.namespace)
        except (NotFoundError, ForbiddenError):
            continue
        finalizers = finalizers_of(obj)
        if FINALIZER_CLEANUP_PROTECTION not in finalizers:
            continue
        await ctx.writer.patch(
            kind,
            name,
            scope.namespace,
            finalizer_patch(obj, [f for f in finalizers if f != FINALIZER_CLEANUP_PROTECTION]),
            scope,
            "release Helm-created dependent of a deleted AutoscalingRunnerSet",
        )
