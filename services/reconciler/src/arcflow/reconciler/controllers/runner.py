"""EphemeralRunner controller (docs/upstream-behaviour.md#runner-controller): JIT Secret via the
registrar RPC, runner Pod.

The JIT config travels only registrar -> reconciler (core NATS reply) -> Secret ``<er>``; it is
never logged, audited or put on a stream (audit events carry names only).
"""

from __future__ import annotations

import time
from datetime import datetime

from arcflow.common.builders import build_jit_secret, build_runner_pod
from arcflow.common.constants import (
    FINALIZER_ER,
    FINALIZER_ER_REGISTRATION,
    LABEL_RUNNER_POD,
    RUNNER_OUTDATED_EXIT_CODE,
)
from arcflow.common.kube import (
    EPHEMERAL_RUNNER,
    POD,
    SECRET,
    ConflictError,
    ForbiddenError,
    InvalidError,
    Resource,
)
from arcflow.common.models import EphemeralRunner, EphemeralRunnerStatus, KubeObject, Pod, Secret
from arcflow.common.naming import trim_label_value
from arcflow.common.rpc.registrar import (
    RegistrarRpcClient,
    RegistrarUnavailableError,
    RunnerExistsRpcError,
    UpstreamRpcError,
)
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, get_or_none, utc_clock, warn
from arcflow.reconciler.controllers.jit_failures import report_jit_failure
from arcflow.reconciler.controllers.manifest import (
    FAILURE_BACKOFF_SECONDS,
    Manifest,
    finalizer_patch,
    is_deleting,
)
from arcflow.reconciler.controllers.pod_refusals import pod_created, report_pod_refused
from arcflow.reconciler.controllers.runner_claims import ANNOTATION_JIT_CLAIM, jit_claim_holder
from arcflow.reconciler.controllers.runner_reaper import reap_if_stuck
from arcflow.reconciler.controllers.runner_removals import FAILED, RunnerRemovals
from arcflow.reconciler.controllers.runner_rules import (
    OOM_KILLED,
    FailedInit,
    PodCreateDecision,
    Registration,
    backoff_remaining,
    failed_init_container,
    hung_after_job,
    job_completed_at,
    oom_killed,
    parse_time,
    pod_create_decision,
    registration_status,
    stamp,
)
from arcflow.reconciler.controllers.runner_set import scope_of
from arcflow.reconciler.controllers.runner_slots import reclaim_after_job, report_oom
from arcflow.reconciler.keys import Result

MAX_FAILURES = 5
JOB_RUNNING_RECHECK_SECONDS = 30.0
WAIT_SECONDS = 1.0
#: A stage deadline due within this long gets a requeue of its own (ADR 0065).
DEADLINE_RECHECK_WITHIN_SECONDS = 60.0
#: A removal call that failed is handed in again after this long (ADR 0101).
REMOVAL_RETRY_SECONDS = 5.0
DONE_PHASES = ("Succeeded", "Failed", "Outdated")
POD_FINISHED = ("Succeeded", "Failed")
#: The Warning Event on a runner whose pod's init container exited non-zero.
REASON_INIT_FAILED = "RunnerInitContainerFailed"

__all__ = ["FAILURE_BACKOFF_SECONDS", "MAX_FAILURES", "reconcile_runner"]


def _registrar(ctx: Context) -> RegistrarRpcClient:
    if ctx.registrar is None:
        raise RuntimeError("no registrar client configured")
    return ctx.registrar


async def _read(ctx: Context, kind: Resource, name: str, namespace: str) -> Manifest | None:
    """The runner's Pod and JIT Secret: from the cache (both carry our labels). Only read here
    (parsed, followed, passed to deletes): the cached objects themselves (ADR 0050)."""
    if ctx.cache is not None and ctx.cache.caches(kind):
        return ctx.cache.get(kind, name, namespace, shared=True)
    return await get_or_none(ctx.kube, kind, name, namespace)


async def _get_pod(ctx: Context, name: str, namespace: str) -> Pod | None:
    doc = await _read(ctx, POD, name, namespace)
    return None if doc is None else Pod.from_observed(doc)


async def _get_secret(ctx: Context, name: str, namespace: str) -> Secret | None:
    doc = await _read(ctx, SECRET, name, namespace)
    return None if doc is None else Secret.from_observed(doc)


def status_of(er: EphemeralRunner) -> EphemeralRunnerStatus:
    return er.status if er.status is not None else EphemeralRunnerStatus()


async def _delete_runner(ctx: Context, er: EphemeralRunner, scope: Scope, why: str) -> None:
    """Delete the ER: the delete's result, applied to the cache, wakes it again at once (its
    finalizers run on the next pass, without waiting for the watcher's echo)."""
    await ctx.writer.delete(er.manifest, scope, why)


async def set_runner_status(
    ctx: Context, er: EphemeralRunner, scope: Scope, status: EphemeralRunnerStatus, why: str
) -> None:
    """Patch the ER status with the fields ``status`` has set, as the document holds them; a
    phase change also publishes ``runner.lifecycle``."""
    previous = status_of(er).phase
    patched = await ctx.writer.patch_status(
        EPHEMERAL_RUNNER.kind,
        er.name,
        er.namespace,
        status.model_dump(by_alias=True, exclude_unset=True, mode="json"),
        scope,
        why,
    )
    phase = status.phase
    if phase and phase != previous:
        await ctx.writer.lifecycle(
            patched,
            scope,
            phase=phase,
            previous_phase=previous,
            reason=status.reason,
            message=status.message,
        )


async def reconcile_runner(ctx: Context, er: EphemeralRunner) -> Result:
    name, namespace = er.name, er.namespace
    scope = scope_of(er)
    status = status_of(er)
    if er.is_deleting:
        return await _clean_up(ctx, er, scope)
    if status.phase in DONE_PHASES:
        await _delete_pod_and_secret(ctx, er, scope, "runner is done")
        return await _deregistered_while_done(ctx, er, scope)
    finalizers = er.finalizers
    missing = [f for f in (FINALIZER_ER, FINALIZER_ER_REGISTRATION) if f not in finalizers]
    if missing:
        patched = await ctx.writer.patch(
            EPHEMERAL_RUNNER.kind,
            name,
            namespace,
            finalizer_patch(er, [*finalizers, *missing]),
            scope,
            "add the EphemeralRunner finalizers",
        )
        er = EphemeralRunner.from_observed(patched)

    if job_completed_at(er.annotations) is not None and not await _get_pod(ctx, name, namespace):
        # Its job is done and its pod gone: a new pod (or JIT config) would run no job (ADR
        # 0100).
        await _delete_runner(ctx, er, scope, "runner's job completed; its pod is gone")
        return Result.done()
    secret = await _get_secret(ctx, name, namespace)
    if secret is None and ctx.cache is not None and status.runner_id:
        # Registered already but not in the cache: a Secret made before it carried our
        # label. Look once before asking the registrar again.
        read = await ctx.cache.get_or_read(SECRET, name, namespace)
        secret = None if read is None else Secret.from_observed(read)
    if secret is None:
        try:
            secret = await _create_jit_secret(ctx, er, scope)
        except (UpstreamRpcError, RegistrarUnavailableError) as exc:
            scale_set_id = er.spec.runner_scale_set_id
            return Result.again(await report_jit_failure(ctx, er, scope, scale_set_id, exc))
        if secret is None:
            return Result.again(WAIT_SECONDS)
        ctx.stages.mark(namespace, name, "jit_config")
    jit_data = secret.decoded_data()

    # The registration goes into the ER status with the runner's first pod-driven status
    # write, not in a write of its own (ADR 0032); until then the JIT Secret says it.
    registration: Registration | None = None
    if status.runner_id == 0:
        try:
            registered_id = int(jit_data.get("runnerId", ""))
        except ValueError:
            await ctx.writer.delete(secret.manifest, scope, "JIT Secret has no usable runnerId")
            return Result.again(WAIT_SECONDS)
        registration = Registration(registered_id, jit_data.get("runnerName", name))

    failures: dict[str, str] = dict(status.failures or {})
    if len(failures) > MAX_FAILURES:
        await _delete_runner(ctx, er, scope, f"runner pod failed more than {MAX_FAILURES} times")
        return Result.done()

    pod = await _get_pod(ctx, name, namespace)
    if pod is None:
        now = ctx.tuning.clock()
        remaining = backoff_remaining(failures, now, ctx.tuning.failure_backoff)
        if remaining > 0:
            return Result.again(remaining)
        try:
            await ctx.writer.create(
                build_runner_pod(er.manifest, jit_data, ctx.build), scope, "runner pod"
            )
            ctx.stages.pod_created(namespace, name)
            pod_created(ctx, er, scope)
        except (ConflictError, InvalidError, ForbiddenError) as exc:
            created = er.metadata.creation_timestamp
            age = now.timestamp() - parse_time(created).timestamp() if created else 0.0
            decision = pod_create_decision(exc, age)
            if not isinstance(exc, ConflictError):  # the API server said no: say it (issue 33)
                await report_pod_refused(ctx, er, scope, exc.message)
            if decision.action == "retry":
                # Transient (a service account not there yet): retried with the per-key
                # backoff of the work queue, the registration written meanwhile.
                if registration is not None:
                    await set_runner_status(
                        ctx, er, scope, registration.status(), "runner registered"
                    )
                raise
            return await _pod_refused(ctx, er, scope, decision, registration)
        # The created pod re-queues the runner (cache routing by owner); the registration is
        # written with the pod's first status, or after ``pending_status_delay`` (ADR 0032).
        return Result.done()
    # A pod stuck in one start-up stage past its deadline is recreated (ADR 0065).
    reaped, recheck = await reap_if_stuck(ctx, er, pod, scope, registration)
    if reaped:
        return Result.again(WAIT_SECONDS)
    # Alive after its job past the grace period: the slot comes back (ADR 0100).
    hung = hung_after_job(er.annotations, pod, time.time(), ctx.tuning.job_completed_grace)
    if hung is not None and hung <= 0:
        await reclaim_after_job(ctx, er, pod, scope)
        return Result.done()
    result = await _follow_pod(ctx, er, pod, scope, registration)
    # A deadline due soon is looked at then; a later one by the periodic resync (60 s).
    if recheck is not None and recheck <= DEADLINE_RECHECK_WITHIN_SECONDS:
        result = _sooner(result, recheck)
    return result if hung is None else _sooner(result, hung)


def _sooner(result: Result, due: float) -> Result:
    """``result``, or a look again just after ``due`` seconds when that is sooner."""
    if result.requeue_after is None or due < result.requeue_after:
        return Result.again(due + WAIT_SECONDS)
    return result


async def _pod_refused(
    ctx: Context,
    er: EphemeralRunner,
    scope: Scope,
    decision: PodCreateDecision,
    registration: Registration | None,
) -> Result:
    if decision.action == "requeue":
        if registration is not None:  # no pod status will carry it while the pod is refused
            await set_runner_status(ctx, er, scope, registration.status(), "runner registered")
        return Result.again(decision.requeue_after or WAIT_SECONDS)
    if decision.action == "delete_runner":
        await _delete_runner(ctx, er, scope, "runner pod refused by quota for over 10 minutes")
        return Result.done()
    failed = EphemeralRunnerStatus(phase="Failed", reason="InvalidPod", message=decision.message)
    await set_runner_status(
        ctx, er, scope, registration_status(registration, failed), "runner pod is invalid"
    )
    runner = _runner_id(er, registration)
    if decision.remove_runner and runner > 0:
        # Off the pass (ADR 0108); the call's end re-queues the runner, whose done pass drops
        # the registration finalizer once it went through.
        _removals(ctx).submit(_registrar(ctx), scope, er.namespace, er.name, runner)
    return Result.done()


async def _create_jit_secret(ctx: Context, er: EphemeralRunner, scope: Scope) -> Secret | None:
    name = er.name
    scale_set_id = er.spec.runner_scale_set_id
    work_folder = er.runner_working_dir()
    registrar = _registrar(ctx)
    if (er.namespace, name) in _removals(ctx).pending:
        return None  # a stale registration of this name is being removed; its end re-queues
    holder = jit_claim_holder(er.annotations, ctx.tuning.clock())
    if holder is not None and holder != ctx.instance:
        return None  # another replica is asking for it; its Secret shows up shortly
    if holder is None:
        await _claim_jit(ctx, er, scope, name)
    try:
        jit = await registrar.generate_jit_config(
            scope.namespace, scope.ars, scale_set_id, name, work_folder
        )
    except RunnerExistsRpcError:
        existing = await registrar.get_runner(scope.namespace, scope.ars, name)
        if existing is None:
            return None
        if existing.runner_scale_set_id in (0, scale_set_id):
            # A stale registration of this name: removed off the pass (ADR 0108); the call's
            # end re-queues the runner, which asks for its JIT config again.
            removals = _removals(ctx)
            removals.take(er.namespace, name, existing.id)
            removals.submit(registrar, scope, er.namespace, name, existing.id)
            return None
        await _delete_runner(ctx, er, scope, "runner name registered in another scale set")
        return None
    secret = build_jit_secret(
        er.manifest,
        ctx.build,
        encoded_jit_config=jit.encoded_jit_config.get_secret_value(),
        runner_id=jit.runner_id,
        runner_name=jit.runner_name,
    )
    return Secret.from_observed(await ctx.writer.create(secret, scope, "JIT config of the runner"))


async def _claim_jit(ctx: Context, er: EphemeralRunner, scope: Scope, name: str) -> None:
    """Claim the JIT request for this replica (the creating replica claimed at creation).
    Conditional on the read resourceVersion: of two racing replicas, the second gets 409."""
    await ctx.writer.patch(
        EPHEMERAL_RUNNER.kind,
        name,
        scope.namespace,
        {
            "metadata": {
                "annotations": {
                    ANNOTATION_JIT_CLAIM: f"{ctx.instance}@{ctx.tuning.clock().timestamp()}"
                },
                "resourceVersion": er.resource_version,
            }
        },
        scope,
        "claim the JIT config request for this replica",
    )


def _runner_id(er: EphemeralRunner, registration: Registration | None) -> int:
    """The runner's id: from its status, or from a registration not written there yet."""
    return status_of(er).runner_id or (registration.runner_id if registration else 0)


def _age_seconds(obj: KubeObject, now: datetime) -> float:
    created = obj.metadata.creation_timestamp
    return now.timestamp() - parse_time(created).timestamp() if created else 0.0


async def _follow_pod(
    ctx: Context, er: EphemeralRunner, pod: Pod, scope: Scope, registration: Registration | None
) -> Result:
    namespace = er.namespace
    has_job = er.has_job() or bool(status_of(er).job_request_id)
    ctx.stages.observe(namespace, er.name, pod.manifest, has_job)
    pod_status = pod.status
    state = pod.runner_state
    terminated = state.terminated if state is not None else None
    if terminated is None:
        failed_init = failed_init_container(pod)
        if failed_init is not None:  # at once, not at the Init deadline (upstream #4457)
            return await _init_failed(ctx, er, pod, scope, registration, failed_init)
    if pod_status.phase == "Failed" and terminated is None:
        return await _pod_failed(ctx, er, pod, scope, registration)
    if terminated is not None:
        exit_code = terminated.exit_code
        if exit_code == 0:
            # Released in this pass, judged on the pod this pass saw exit 0: a pod gone
            # before a later finalizer pass would look like a runner GitHub still holds.
            await _delete_runner(ctx, er, scope, "runner finished its job")
            doc = await _read(ctx, EPHEMERAL_RUNNER, er.name, er.namespace)
            deleting = None if doc is None else EphemeralRunner.from_observed(doc)
            if deleting is None or not deleting.is_deleting:
                return Result.done()  # its own pass releases it
            return await _clean_up(ctx, deleting, scope, pod)
        if exit_code == RUNNER_OUTDATED_EXIT_CODE:
            outdated = EphemeralRunnerStatus(
                phase="Outdated", reason="Outdated", message="Runner is deprecated"
            )
            await set_runner_status(
                ctx,
                er,
                scope,
                registration_status(registration, outdated),
                "runner image is outdated",
            )
            # Its set, Outdated now, deletes it; the finalizer makes the one removal call
            # (ADR 0108: no call here, which made it twice).
            return Result.done()
        if oom_killed(pod):  # said, counted; with a job the runner ends Failed (ADR 0100)
            message = await report_oom(ctx, er, pod, scope, registration)
            return await _pod_failed(
                ctx, er, pod, scope, registration, reason=OOM_KILLED, message=message
            )
        return await _pod_failed(ctx, er, pod, scope, registration)
    phase = pod_status.phase or "Pending"
    live_phase = status_of(er).phase
    if not live_phase and (state is None or phase != "Running"):
        # A new runner's pod that is not running yet: its first status write (phase and
        # registration in one) waits for it to run, or for ``pending_status_delay`` to pass
        # (ADR 0032). An empty phase already counts as pending for its set.
        # Real time against the API server's timestamp (not the injectable clock); bounded by
        # the delay whatever the clocks' skew.
        age = max(0.0, _age_seconds(pod, utc_clock()))
        wait = ctx.tuning.pending_status_delay - age
        if wait > 0:
            return Result.again(wait)
    if state is None:
        if registration is None and live_phase:
            return Result.done()
        pending = EphemeralRunnerStatus(phase=live_phase or "Pending")
        await set_runner_status(
            ctx,
            er,
            scope,
            registration_status(registration, pending),
            "runner pod is not started yet",
        )
        return Result.done()
    wanted = registration_status(
        registration,
        EphemeralRunnerStatus(
            phase=phase if phase in ("Pending", "Running") else live_phase or "Pending",
            ready=pod_status.is_true("Ready"),
            reason=pod_status.reason,
            message=pod_status.message,
        ),
    )
    # Compared key by key with what the status patch would write, on the live document: a
    # key the status lacks is written even when the model's default equals the wanted value.
    live = er.manifest.get("status") or {}
    patch = wanted.model_dump(by_alias=True, exclude_unset=True, mode="json")
    if any(live.get(k) != v for k, v in patch.items()):
        await set_runner_status(ctx, er, scope, wanted, f"runner pod is {phase}")
    return Result.done()


async def _init_failed(
    ctx: Context,
    er: EphemeralRunner,
    pod: Pod,
    scope: Scope,
    registration: Registration | None,
    failed: FailedInit,
) -> Result:
    """An init container exited non-zero: a Warning Event on the runner naming it and its
    exit code (once per pod), then the pod is handled as a failed pod."""
    if pod.uid not in (status_of(er).failures or {}):
        message = f"pod {pod.name}: {failed.message}"
        await warn(ctx, er.manifest, REASON_INIT_FAILED, message, scope, "Event: init failed")
    return await _pod_failed(
        ctx, er, pod, scope, registration, reason=REASON_INIT_FAILED, message=failed.message
    )


async def _pod_failed(
    ctx: Context,
    er: EphemeralRunner,
    pod: Pod,
    scope: Scope,
    registration: Registration | None,
    *,
    reason: str | None = None,
    message: str | None = None,
) -> Result:
    """``deleteEphemeralRunnerOrPod``: a runner with a job goes; otherwise retry its pod."""
    if er.has_job():
        await _delete_runner(ctx, er, scope, "runner pod failed during a job")
        return Result.done()
    await ctx.writer.delete(pod.manifest, scope, "runner pod failed: retry with backoff")
    failures = dict(status_of(er).failures or {})
    failures[pod.uid] = stamp(ctx.tuning.clock())
    failed = EphemeralRunnerStatus(
        failures=failures,
        ready=False,
        reason=pod.status.reason if reason is None else reason,
        message=pod.status.message if message is None else message,
    )
    # No phase: a status write without a lifecycle event.
    await set_runner_status(
        ctx, er, scope, registration_status(registration, failed), "record a runner pod failure"
    )
    return Result.again(WAIT_SECONDS)


async def _delete_pod_and_secret(ctx: Context, er: EphemeralRunner, scope: Scope, why: str) -> bool:
    name, namespace = er.name, er.namespace
    remaining = False
    for obj in (await _get_pod(ctx, name, namespace), await _get_secret(ctx, name, namespace)):
        if obj is not None:
            remaining = True
            if not obj.is_deleting:  # a terminating pod needs no second delete
                await ctx.writer.delete(obj.manifest, scope, why)
    return remaining


async def _delete_running_pod_and_secret(
    ctx: Context, er: EphemeralRunner, pod: Pod | None, scope: Scope
) -> None:
    if pod is None or pod.is_deleting or pod.phase in POD_FINISHED:
        return
    await _delete_pod_and_secret(ctx, er, scope, "runner is being deleted; its pod still runs")


async def _delete_container_hook_objects(ctx: Context, er: EphemeralRunner, scope: Scope) -> None:
    """Kubernetes-mode container hooks leave job pods/secrets labelled ``runner-pod=<er>``."""
    if not er.has_container_hook_configured():
        return
    namespace = er.namespace
    selector = {LABEL_RUNNER_POD: trim_label_value(er.name)}
    for resource in (POD, SECRET):
        for obj in (
            await ctx.kube.list(resource, namespace=namespace, label_selector=selector)
        ).items:
            if not is_deleting(obj):
                await ctx.writer.delete(obj, scope, "container hook object of a deleted runner")


def _exited(pod: Pod | None, *, zero: bool) -> bool:
    """The runner container ended (with exit code 0 when ``zero``)."""
    state = pod.runner_state if pod is not None else None
    terminated = state.terminated if state is not None else None
    return terminated is not None and (terminated.exit_code == 0 or not zero)


def _removed_with_job(er: EphemeralRunner, pod: Pod | None) -> bool:
    """GitHub removed the ephemeral (JIT) runner with its job, so no removal call is needed:
    its container exited 0 (as upstream 0.15), or GitHub reported its job completed (ADR
    0100)."""
    return _exited(pod, zero=True) or job_completed_at(er.annotations) is not None


async def _registered_id(ctx: Context, er: EphemeralRunner) -> int:
    registered = status_of(er).runner_id
    if registered == 0:
        secret = await _get_secret(ctx, er.name, er.namespace)
        if secret is not None:
            try:
                registered = int(secret.decoded_data().get("runnerId", "0"))
            except ValueError:
                registered = 0
    return registered


def _removals(ctx: Context) -> RunnerRemovals:
    return ctx.state(RunnerRemovals)


def _removal_pending(ctx: Context, er: EphemeralRunner, scope: Scope, runner: int) -> Result | None:
    """``None`` once GitHub no longer holds ``runner`` (the call answered ``ok`` or
    ``not_found``); else what the pass returns: the call handed to the pool (its end re-queues
    the runner), or a look again later."""
    removals = _removals(ctx)
    outcome = removals.take(er.namespace, er.name, runner)
    if outcome is None:
        removals.submit(_registrar(ctx), scope, er.namespace, er.name, runner)
        return Result.done()
    if outcome == "job_still_running":
        return Result.again(ctx.tuning.job_running_recheck)
    if outcome == FAILED:
        return Result.again(REMOVAL_RETRY_SECONDS)
    return None


async def _deregistered_while_done(ctx: Context, er: EphemeralRunner, scope: Scope) -> Result:
    """A done runner not deleted yet whose removal was handed in (``Failed/InvalidPod``): once
    it went through, the registration finalizer goes, so its later delete makes no second
    call (ADR 0108). A call that failed, or one a restart lost, is the finalizer's to make."""
    runner = status_of(er).runner_id
    removals = _removals(ctx)
    if FINALIZER_ER_REGISTRATION not in er.finalizers or runner <= 0:
        return Result.done()
    if removals.take(er.namespace, er.name, runner) not in ("ok", "not_found"):
        return Result.done()
    await ctx.writer.patch(
        EPHEMERAL_RUNNER.kind,
        er.name,
        er.namespace,
        finalizer_patch(er, [f for f in er.finalizers if f != FINALIZER_ER_REGISTRATION]),
        scope,
        "runner removed from the service while done",
    )
    return Result.done()


async def _clean_up(
    ctx: Context, er: EphemeralRunner, scope: Scope, seen: Pod | None = None
) -> Result:
    """The finalizers of a deleted runner; ``seen`` is the pod the pass that deleted it saw
    (a runner that exited 0 is released in that pass, judged on it)."""
    finalizers = er.finalizers
    if FINALIZER_ER not in finalizers:
        return Result.done()
    pod = seen if seen is not None else await _get_pod(ctx, er.name, er.namespace)
    if FINALIZER_ER_REGISTRATION in finalizers and not _removed_with_job(er, pod):
        if _exited(pod, zero=False):
            # The runner process ended (killed for memory, crashed): its pod, which a sidecar
            # may keep up, goes now, whatever GitHub still says about the runner (ADR 0100).
            await _delete_running_pod_and_secret(ctx, er, pod, scope)
            pod = await _get_pod(ctx, er.name, er.namespace)  # deleting now: no second delete
        registered = await _registered_id(ctx, er)
        if registered > 0:
            # Off the reconcile path, bounded (ADR 0101): the call's end re-queues this runner.
            waiting = _removal_pending(ctx, er, scope, registered)
            if waiting is not None:
                return waiting
            # Read again: the removal may have ended an idle runner's pod meanwhile.
            pod = await _get_pod(ctx, er.name, er.namespace)
    # A pod that still runs (an idle runner scaled down, a set deleted) holds a node's
    # resources: it goes now, with its JIT Secret, instead of when the rate-limited garbage
    # collector gets to it (19 s for 200 runners on a real cluster, 3 s this way; ADR 0057).
    # A finished pod holds nothing: the collector takes it and its Secret, at no cost of ours.
    await _delete_running_pod_and_secret(ctx, er, pod, scope)
    await _delete_container_hook_objects(ctx, er, scope)
    await ctx.writer.patch(
        EPHEMERAL_RUNNER.kind,
        er.name,
        er.namespace,
        finalizer_patch(
            er, [f for f in finalizers if f not in (FINALIZER_ER, FINALIZER_ER_REGISTRATION)]
        ),
        scope,
        "runner removed from the service: release the EphemeralRunner",
    )
    ctx.stages.runner_gone(er.namespace, er.name)
    ctx.runner_set_state.pod_refusals_reported.pop((er.namespace, er.name), None)
    _removals(ctx).forget(er.namespace, er.name)
    return Result.done()
