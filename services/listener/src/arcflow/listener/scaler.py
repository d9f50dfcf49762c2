"""The desired-runner computation and the patches it produces
(docs/upstream-behaviour.md#scaling-and-patch-id).

Pure: :class:`DesiredRunnerScaler` holds upstream's three state variables and turns
``totalAssignedJobs`` into ``(target, patchID)``; the patch bodies are plain functions. The
worker does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from arcflow.common.constants import ANNOTATION_JOB_COMPLETED, UNBOUNDED_MAX_RUNNERS
from arcflow.common.events import JobInfo

MAX_INT32 = UNBOUNDED_MAX_RUNNERS
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Decision:
    """One ``HandleDesiredRunnerCount`` result: the replica target and the patch id to send."""

    target: int
    patch_id: int
    assigned_jobs: int
    was_dirty: bool
    #: ``True`` when no ERS patch is to be sent: the count stands as last written (ADR 0043).
    skipped: bool = False


class DesiredRunnerScaler:
    """Upstream's scaler state machine, one per scale set.

    State starts at ``target=-1``, ``patch_seq=-1``, not dirty; job started/completed mark it
    dirty. ``decide`` increments the sequence on every call (wrapping at MaxInt32 back to 1),
    computes ``min(min_runners + assigned, max_runners)`` and forces ``patchID=0`` when nothing
    happened since the last call, the target did not move, and it equals ``min_runners`` (the
    "force state" signal that lets the ERS scale idle runners down). The very first call
    always yields 0.

    ``decide(..., unchanged_since=(target, patchID))`` is the one departure (ADR 0043): when
    the caller says the ERS already holds that request and this batch completed no job, a
    decision whose count equals it is *skipped*: no new patch id, the ERS keeps the one it
    holds. The dirty flag is consumed as if the patch had been sent, so the next idle tick
    forces ``patchID=0`` exactly when upstream's would.
    """

    def __init__(self, min_runners: int, max_runners: int) -> None:
        if min_runners < 0 or max_runners < 0:
            raise ValueError("min_runners and max_runners must not be negative")
        if min_runners > max_runners:
            raise ValueError(f"min_runners {min_runners} > max_runners {max_runners}")
        self.min_runners = min_runners
        self.max_runners = max_runners
        self.target = -1
        self.patch_seq = -1
        self.dirty = False

    def set_minimum(self, min_runners: int) -> None:
        """The minimum in force now (scheduledOverrides, ADR 0063), capped by the maximum;
        the next :meth:`decide` uses it in the formula and in the force-state rule."""
        if min_runners < 0:
            raise ValueError("min_runners must not be negative")
        self.min_runners = min(min_runners, self.max_runners)

    def job_started(self) -> None:
        self.dirty = True

    def job_completed(self) -> None:
        self.dirty = True

    def desired_count(self, assigned_jobs: int, capacity: int | None = None) -> int:
        """``min(minRunners + totalAssignedJobs, maxRunners)``, and at most ``capacity``: the
        variant's share of the set's shared capacity (ADR 0062), ``None`` when there is none.

        The minimum and the cap are separate inputs: the minimum is the scaler's own (what
        the ERS keeps idle), the cap comes from the set's allocation."""
        if assigned_jobs < 0:
            raise ValueError("assigned job count must not be negative")
        count = min(self.min_runners + assigned_jobs, self.max_runners)
        return count if capacity is None else max(0, min(count, capacity))

    def decide(
        self,
        assigned_jobs: int,
        *,
        unchanged_since: tuple[int, int] | None = None,
        capacity: int | None = None,
    ) -> Decision:
        target = self.desired_count(assigned_jobs, capacity)
        was_dirty = self.dirty
        self.dirty = False
        # An idle tick at the minimum forces the state (patchID 0): the set removes idle
        # runners a superseded request made (upstream does the same). The count standing in
        # the window does not hold it back unless that write was the forced state itself
        # (sent once, ADR 0119); before, such runners lingered until the window passed.
        forced = not was_dirty and target == self.target and target == self.min_runners
        if (
            unchanged_since is not None
            and unchanged_since[0] == target
            and not (forced and unchanged_since[1] != 0)
        ):
            self.target = target
            return Decision(
                target=target,
                patch_id=unchanged_since[1],
                assigned_jobs=assigned_jobs,
                was_dirty=was_dirty,
                skipped=True,
            )
        if self.patch_seq == MAX_INT32:
            self.patch_seq = 0
        self.patch_seq += 1
        self.target = target
        patch_id = 0 if forced else self.patch_seq
        return Decision(
            target=target, patch_id=patch_id, assigned_jobs=assigned_jobs, was_dirty=was_dirty
        )


def ers_patch(decision: Decision, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON merge patch for the ERS: ``replicas`` 0 is sent as ``null`` (omitempty).

    ``annotations`` (the variant's capacity share, ADR 0062) ride in the same write."""
    replicas: int | None = decision.target if decision.target != 0 else None
    patch: dict[str, Any] = {"spec": {"patchID": decision.patch_id, "replicas": replicas}}
    if annotations:
        patch["metadata"] = {"annotations": dict(annotations)}
    return patch


def runner_completed_patch(job: JobInfo, now: datetime) -> dict[str, Any]:
    """The EphemeralRunner patch for a completed job: GitHub's finish time, else when this
    listener learned it, so a redelivered batch writes the same value (ADR 0100; the upstream
    CRD's status has no field for it and prunes unknown ones)."""
    at = job.finish_time or now
    at = at.astimezone(UTC) if at.tzinfo is not None else at
    return {"metadata": {"annotations": {ANNOTATION_JOB_COMPLETED: at.strftime(_STAMP)}}}


def runner_status_patch(job: JobInfo) -> dict[str, Any]:
    """The EphemeralRunner ``status`` fields for a started job, empty values left out."""
    repository = f"{job.owner_name}/{job.repository_name}" if job.repository_name else ""
    fields: dict[str, Any] = {
        "jobRequestId": job.runner_request_id,
        "jobRepositoryName": repository,
        "jobId": job.job_id,
        "workflowRunId": job.workflow_run_id,
        "jobWorkflowRef": job.job_workflow_ref,
        "jobDisplayName": job.job_display_name,
    }
    return {k: v for k, v in fields.items() if v not in ("", 0, None)}
