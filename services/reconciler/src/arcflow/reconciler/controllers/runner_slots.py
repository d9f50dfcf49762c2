"""Slots that are finished but alive come back (ADR 0100; the rules are in :mod:`.runner_rules`).

Two ways a runner holds its slot after it can do no more work, whatever put its pod there:

* GitHub completed its job (its listener wrote ``arcflow.io/job-completed-at`` on it) and the
  runner container still runs ``job_completed_grace`` seconds later: the process hangs after its
  job (upstream #4603, #4155, #4436). The runner goes: its pod is stopped by its finalizer, and
  no removal call is made (GitHub removed the ephemeral runner with its job).
* The runner container was killed for memory (``OOMKilled``) while the pod stays up. A runner
  with a job ends ``Failed`` and goes, its pod at once (the process that held the job is dead);
  one without a job gets a new pod, as for any failed pod.

Each says which runner and why in a Warning Event on the EphemeralRunner, and counts in
``arcflow_reconciler_slots_reclaimed`` by reason.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from arcflow.common.kube import EPHEMERAL_RUNNER
from arcflow.common.models import EphemeralRunner, EphemeralRunnerStatus, Pod
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, warn
from arcflow.reconciler.controllers.runner_rules import (
    OOM_KILLED,
    Registration,
    job_completed_at,
    registration_status,
    stamp,
)
from arcflow.reconciler.metrics import variant_labels

log = logging.getLogger(__name__)

#: The Warning Event on a runner whose pod still ran a grace period after its job completed.
REASON_ALIVE_AFTER_JOB = "RunnerAliveAfterJob"
#: The Warning Event on a runner whose container was killed for memory.
REASON_OOM_KILLED = "RunnerOOMKilled"
#: ``reason`` of ``arcflow_reconciler_slots_reclaimed``.
RECLAIMED_AFTER_JOB = "alive_after_job"
RECLAIMED_OOM = "oom_killed"


def _count(ctx: Context, er: EphemeralRunner, reason: str) -> None:
    labels = variant_labels(er.name, er.namespace, er.labels)
    labels["name"] = next(
        (r.name for r in er.metadata.owner_references or [] if r.controller), labels["name"]
    )
    ctx.metrics.slots_reclaimed.add(1, {**labels, "reason": reason})


async def reclaim_after_job(ctx: Context, er: EphemeralRunner, pod: Pod, scope: Scope) -> None:
    """The runner's job completed and its pod still runs past the grace period: say so and
    delete the runner (its finalizer stops the pod)."""
    completed = job_completed_at(er.annotations) or 0.0
    at = stamp(datetime.fromtimestamp(completed, UTC))
    message = (
        f"runner {er.name}: GitHub completed its job at {at}, and its pod {pod.name} still ran "
        f"{ctx.tuning.job_completed_grace:g} s later: pod stopped, runner removed"
    )
    log.warning("%s/%s", er.namespace, message)
    await warn(ctx, er.manifest, REASON_ALIVE_AFTER_JOB, message, scope, "Event: alive after job")
    _count(ctx, er, RECLAIMED_AFTER_JOB)
    await ctx.writer.delete(er.manifest, scope, "job completed, pod still running: slot reclaimed")


async def report_oom(
    ctx: Context, er: EphemeralRunner, pod: Pod, scope: Scope, registration: Registration | None
) -> str:
    """The runner container was killed for memory: a Warning Event and the count, once per pod;
    a runner with a job is marked ``Failed`` (the caller deletes it). Returns the message."""
    has_job = er.has_job()
    message = (
        f"runner {er.name}: its container in pod {pod.name} was killed for memory ({OOM_KILLED})"
        + (", during its job: the runner ends Failed" if has_job else ": a new pod is made")
    )
    failures = (er.status.failures if er.status is not None else None) or {}
    if pod.uid in failures:
        return message  # said for this pod already
    log.warning("%s/%s", er.namespace, message)
    await warn(ctx, er.manifest, REASON_OOM_KILLED, message, scope, "Event: runner OOMKilled")
    _count(ctx, er, RECLAIMED_OOM)
    if has_job:
        status = registration_status(
            registration,
            EphemeralRunnerStatus(phase="Failed", reason=OOM_KILLED, message=message),
        )
        await ctx.writer.patch_status(
            EPHEMERAL_RUNNER.kind,
            er.name,
            er.namespace,
            status.model_dump(by_alias=True, exclude_unset=True, mode="json"),
            scope,
            "runner OOMKilled",
        )
    return message


__all__ = [
    "REASON_ALIVE_AFTER_JOB",
    "REASON_OOM_KILLED",
    "reclaim_after_job",
    "report_oom",
]
