"""The runner pod reaper's I/O (ADR 0065; the rules are in :mod:`.reaper_rules`).

Called by the EphemeralRunner controller for each pass over a runner whose pod exists: reads
the set's deadlines (the ARS annotations, from the cache), and for a pod past its stage's
deadline: a Warning Event on the EphemeralRunner naming the stage and the kubelet's reason,
the pod deleted (with no grace period when its node is gone: no kubelet will confirm) and the
failure recorded, so the runner makes a new pod after upstream's back-off and is deleted
after more than five failures (docs/upstream-behaviour.md#runner-controller). A runner with a
job is not given a new pod: its job died with the node, so the runner goes, as for a pod that
failed during a job.
"""

from __future__ import annotations

import logging
import time

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, build_event
from arcflow.common.models import EphemeralRunner, EphemeralRunnerStatus, Pod
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, read_observed, warn
from arcflow.reconciler.controllers.manifest import annotations_of, resource_version
from arcflow.reconciler.controllers.reaper_rules import (
    Deadlines,
    Stuck,
    deadlines_for,
    recheck_after,
    stuck,
)
from arcflow.reconciler.controllers.runner_rules import (
    Registration,
    registration_status,
    stamp,
)
from arcflow.reconciler.metrics import variant_labels

log = logging.getLogger(__name__)
REASON_STUCK = "RunnerPodStuck"
REASON_BAD_DEADLINES = "InvalidRunnerDeadlines"


async def set_deadlines(ctx: Context, er: EphemeralRunner, scope: Scope) -> Deadlines:
    ars = await read_observed(ctx, AUTOSCALING_RUNNER_SET, scope.ars, er.namespace)
    annotations = annotations_of(ars) if ars is not None else {}
    deadlines, error = deadlines_for(annotations, scope.variant, ctx.tuning.deadlines)
    if error is not None and ars is not None:
        key = (er.namespace, scope.ars, resource_version(ars) or "")
        if ctx.ars_state.deadline_errors_reported.get(key[:2]) != key[2]:
            ctx.ars_state.deadline_errors_reported[key[:2]] = key[2]
            event = build_event(
                ars, REASON_BAD_DEADLINES, error, type="Warning", component="arcflow-reconciler"
            )
            created = await ctx.kube.create(event)
            await ctx.writer.audit("created", created, scope, "Event: unusable runner deadlines")
    return deadlines


async def reap_if_stuck(
    ctx: Context, er: EphemeralRunner, pod: Pod, scope: Scope, registration: Registration | None
) -> tuple[bool, float | None]:
    """(whether the pod was reaped, seconds until its stage's deadline if it was not)."""
    deadlines = await set_deadlines(ctx, er, scope)
    now = time.time()  # against the API server's timestamps: real time, as the kubelet's
    verdict = stuck(pod, now, deadlines)
    if verdict is None:
        return False, recheck_after(pod, now, deadlines)
    await _reap(ctx, er, pod, scope, registration, verdict)
    return True, None


async def _reap(
    ctx: Context,
    er: EphemeralRunner,
    pod: Pod,
    scope: Scope,
    registration: Registration | None,
    verdict: Stuck,
) -> None:
    message = verdict.message
    labels = variant_labels(er.name, er.namespace, er.labels)
    ers_name = next(
        (r.name for r in er.metadata.owner_references or [] if r.controller), labels["name"]
    )
    labels["name"] = ers_name
    ctx.metrics.reaped.add(1, {**labels, "stage": verdict.stage, "reason": verdict.reason})
    log.warning("runner %s/%s: %s", er.namespace, er.name, message, extra={"stage": verdict.stage})
    stuck_in = f"Event: runner pod stuck in {verdict.stage}"
    await warn(ctx, er.manifest, REASON_STUCK, f"{verdict.stage}: {message}", scope, stuck_in)
    grace = 0 if verdict.stage == "NodeLost" else None
    if er.has_job():
        # Its job died with the pod: the runner goes (deleteEphemeralRunnerOrPod).
        await ctx.writer.delete(pod.manifest, scope, message, grace_period_seconds=grace)
        await ctx.writer.delete(er.manifest, scope, f"runner's pod lost during a job: {message}")
        return
    await ctx.writer.delete(pod.manifest, scope, message, grace_period_seconds=grace)
    failures = dict((er.status.failures if er.status else None) or {})
    failures[pod.uid] = stamp(ctx.tuning.clock())
    status = EphemeralRunnerStatus(
        failures=failures,
        ready=False,
        reason=f"{verdict.stage}:{verdict.reason}" if verdict.reason else verdict.stage,
        message=message,
    )
    await ctx.writer.patch_status(
        EPHEMERAL_RUNNER.kind,
        er.name,
        er.namespace,
        registration_status(registration, status).model_dump(
            by_alias=True, exclude_unset=True, mode="json"
        ),
        scope,
        f"record a stuck runner pod ({verdict.stage})",
    )


__all__ = ["REASON_STUCK", "reap_if_stuck", "set_deadlines"]
