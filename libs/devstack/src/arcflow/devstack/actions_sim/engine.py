"""The stateful core of the simulated Actions service: scale sets, sessions, queues, jobs, runners.

No HTTP here: the server maps requests onto these methods, and tests or the dev stack drive the
job and runner side through the same object. Everything runs on one event loop, so plain
methods mutate state and ``_notify`` wakes the long polls
(docs/upstream-behaviour.md#actions-simulator).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from arcflow.devstack.actions_sim.faults import FaultBook
from arcflow.devstack.actions_sim.jit import JitConfigError, decode_jit_config, encode_jit_config
from arcflow.devstack.actions_sim.model import (
    MAX_JOB_ATTEMPTS,
    Job,
    JobState,
    Message,
    Runner,
    RunnerGroup,
    RunnerStatus,
    ScaleSet,
    ServiceError,
    Session,
    Statistics,
    TypeNames,
    job_message,
    lower_keys,
    parse_int_field,
    parse_labels,
    parse_runner_setting,
    utcnow,
)
from arcflow.devstack.actions_sim.queues import MessageQueues

Mode = Literal["direct", "acquire"]
_ACTIVE = (JobState.ASSIGNED, JobState.RUNNING)


@dataclass(frozen=True)
class RunnerConnection:
    runner_id: int
    runner_name: str
    scale_set_id: int
    job_id: str | None


def _scale_set_not_found(scale_set_id: int) -> ServiceError:
    return ServiceError(
        404, TypeNames.SCALE_SET_NOT_FOUND, f"The runner scale set {scale_set_id} does not exist."
    )


class ActionsEngine:
    """One tenant of the Actions service, with its runner groups, scale sets and work."""

    def __init__(
        self,
        *,
        mode: Mode,
        svc_url: Callable[[], str],
        session_idle_timeout: float,
        assign_timeout: float | None,
        faults: FaultBook,
    ) -> None:
        if mode not in ("direct", "acquire"):
            raise ValueError(f"mode must be 'direct' or 'acquire', got {mode!r}")
        self.mode: Mode = mode
        self._svc_url = svc_url
        self.session_idle_timeout = session_idle_timeout
        self.assign_timeout = assign_timeout
        self._faults = faults
        self.groups: dict[int, RunnerGroup] = {1: RunnerGroup(1, "Default", is_default=True)}
        self.scale_sets: dict[int, ScaleSet] = {}
        self.sessions: dict[int, Session] = {}
        self.queues = MessageQueues()
        self.jobs: dict[str, Job] = {}
        self._open_jobs: dict[str, Job] = {}
        #: Every change of a scale set's ``assigned + running`` count: (scale set id, +1/-1).
        self.active_log: list[tuple[int, int]] = []
        self._active_now: Counter[int] = Counter()
        self.runners: dict[int, Runner] = {}
        self._group_ids = itertools.count(2)
        self._scale_set_ids = itertools.count(1)
        self._runner_ids = itertools.count(1)
        self._request_ids = itertools.count(1001)
        self._run_ids = itertools.count(90001)
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._changed = asyncio.Event()
        self.closing = False

    # --- change notification -------------------------------------------------------------
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, within: float) -> None:
        """Return when any state changes or after ``within`` seconds."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=max(within, 0.0))

    # --- runner groups -------------------------------------------------------------------
    def add_runner_group(self, name: str) -> RunnerGroup:
        if not name or not name.strip():
            raise ValueError("runner group name must not be empty")
        if any(g.name.lower() == name.lower() for g in self.groups.values()):
            raise ValueError(f"runner group {name!r} already exists")
        group = RunnerGroup(next(self._group_ids), name)
        self.groups[group.id] = group
        return group

    def find_groups(self, name: str) -> list[RunnerGroup]:
        return [g for g in self.groups.values() if g.name.lower() == name.lower()]

    def group_size(self, group_id: int) -> int:
        sets = {s.id for s in self.scale_sets.values() if s.runner_group_id == group_id}
        return sum(1 for r in self.runners.values() if r.scale_set_id in sets)

    # --- scale sets ----------------------------------------------------------------------
    def scale_set(self, scale_set_id: int) -> ScaleSet:
        found = self.scale_sets.get(scale_set_id)
        if found is None:
            raise _scale_set_not_found(scale_set_id)
        return found

    def scale_set_wire(self, scale_set: ScaleSet) -> dict[str, Any]:
        group = self.groups.get(scale_set.runner_group_id)
        return scale_set.to_wire(
            group.name if group else "", self._svc_url(), self.statistics(scale_set.id)
        )

    def find_scale_sets(self, group_id: int, name: str) -> list[ScaleSet]:
        return [
            s
            for s in self.scale_sets.values()
            if s.name.lower() == name.lower() and (not group_id or s.runner_group_id == group_id)
        ]

    def _check_group(self, group_id: int) -> None:
        if group_id not in self.groups:
            raise ServiceError(
                404, TypeNames.RUNNER_GROUP_NOT_FOUND, f"Runner group {group_id} was not found."
            )

    def _check_unique(self, group_id: int, name: str, own_id: int = 0) -> None:
        for other in self.scale_sets.values():
            same = other.runner_group_id == group_id and other.name.lower() == name.lower()
            if same and other.id != own_id:
                raise ServiceError(
                    409,
                    TypeNames.SCALE_SET_EXISTS,
                    f"A runner scale set named {name} already exists in runner group {group_id}.",
                )

    def create_scale_set(self, body: Any) -> ScaleSet:
        if not isinstance(body, dict):
            raise ServiceError(400, TypeNames.ARGUMENT, "request body must be a JSON object")
        data = lower_keys(body)
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ServiceError(400, TypeNames.ARGUMENT, "name is required")
        group_id = parse_int_field(data.get("runnergroupid"), "runnerGroupId") or 1
        self._check_group(group_id)
        self._check_unique(group_id, name)
        scale_set = ScaleSet(
            id=next(self._scale_set_ids),
            name=name,
            runner_group_id=group_id,
            labels=parse_labels(data.get("labels"), name),
            runner_setting=parse_runner_setting(data.get("runnersetting")),
            created_on=utcnow(),
        )
        self.scale_sets[scale_set.id] = scale_set
        self.queues.open(scale_set.id)
        self._dispatch()
        return scale_set

    def update_scale_set(self, scale_set_id: int, body: Any) -> ScaleSet:
        """Apply the non-zero fields only, as clients send partial objects
        (docs/upstream-behaviour.md#actions-endpoints)."""
        scale_set = self.scale_set(scale_set_id)
        if not isinstance(body, dict):
            raise ServiceError(400, TypeNames.ARGUMENT, "request body must be a JSON object")
        data = lower_keys(body)
        name = data.get("name") or scale_set.name
        if not isinstance(name, str):
            raise ServiceError(400, TypeNames.ARGUMENT, "name must be a string")
        group_id = parse_int_field(data.get("runnergroupid"), "runnerGroupId")
        group_id = group_id or scale_set.runner_group_id
        self._check_group(group_id)
        self._check_unique(group_id, name, own_id=scale_set.id)
        labels = parse_labels(data.get("labels"), "")
        setting = parse_runner_setting(data.get("runnersetting"))
        scale_set.name = name
        scale_set.runner_group_id = group_id
        if labels:
            scale_set.labels = labels
        if any(setting.values()):
            scale_set.runner_setting = setting
        self._dispatch()
        return scale_set

    def delete_scale_set(self, scale_set_id: int, *, keep_running: bool = False) -> None:
        """Drop the set with its session, queue and runners; its unstarted jobs go back.

        ``keep_running``: a job already running on one of its runners runs to its end (the
        runner keeps it; it leaves with it), instead of being canceled. The control API's
        "deleted behind the controller's back" uses it, so a test sees what the controller
        does with everything not started yet."""
        self.scale_set(scale_set_id)
        del self.scale_sets[scale_set_id]
        self.sessions.pop(scale_set_id, None)
        self.queues.drop(scale_set_id)
        busy = {
            j.runner_id
            for j in self._open_jobs.values()
            if keep_running and j.state is JobState.RUNNING and j.scale_set_id == scale_set_id
        }
        for runner_id in [r.id for r in self.runners.values() if r.scale_set_id == scale_set_id]:
            if runner_id not in busy:
                del self.runners[runner_id]
        for job in list(self._open_jobs.values()):
            job.offered_to.discard(scale_set_id)
            if job.scale_set_id != scale_set_id:
                if job.state is JobState.AVAILABLE and not job.offered_to:
                    job.state = JobState.QUEUED
                continue
            if job.state is JobState.RUNNING and keep_running:
                continue
            self._cancel_timer(job.job_id)
            if job.state is JobState.RUNNING:
                self._finish(job, "canceled")
            else:
                self._requeue(job, new_attempt=False)
        self._dispatch()

    # --- statistics ----------------------------------------------------------------------
    def statistics(self, scale_set_id: int) -> Statistics:
        stats = Statistics()
        for job in self._open_jobs.values():
            if job.state is JobState.AVAILABLE and scale_set_id in job.offered_to:
                stats.total_available_jobs += 1
            elif job.scale_set_id == scale_set_id and job.state in _ACTIVE:
                stats.total_assigned_jobs += 1
                if job.state is JobState.RUNNING:
                    stats.total_running_jobs += 1
        for runner in self.runners.values():
            if runner.scale_set_id != scale_set_id:
                continue
            if runner.status is RunnerStatus.BUSY:
                stats.total_busy_runners += 1
            elif runner.status is RunnerStatus.IDLE:
                stats.total_idle_runners += 1
        stats.total_registered_runners = stats.total_busy_runners + stats.total_idle_runners
        return stats

    # --- sessions ------------------------------------------------------------------------
    def live_session(self, scale_set_id: int) -> Session | None:
        """The set's session unless it idled out (a crashed listener must not block forever)."""
        session = self.sessions.get(scale_set_id)
        if session is None:
            return None
        idle = time.monotonic() - session.last_activity
        if session.polls_in_flight == 0 and idle > self.session_idle_timeout:
            del self.sessions[scale_set_id]
            return None
        return session

    def create_session(self, scale_set_id: int, owner: str) -> Session:
        scale_set = self.scale_set(scale_set_id)
        if self.live_session(scale_set_id) is not None:
            raise ServiceError(
                409,
                TypeNames.SESSION_CONFLICT,
                f"The actions runner scaleset {scale_set.name} already has an active session.",
            )
        session = Session(
            id=str(uuid.uuid4()),
            scale_set_id=scale_set_id,
            owner=owner,
            token_id=uuid.uuid4().hex,
            last_activity=time.monotonic(),
        )
        self.sessions[scale_set_id] = session
        self._dispatch()
        return session

    def session(self, scale_set_id: int, session_id: str) -> Session:
        self.scale_set(scale_set_id)
        session = self.live_session(scale_set_id)
        if session is None or session.id != session_id:
            raise ServiceError(
                404,
                TypeNames.SESSION_NOT_FOUND,
                f"runner referenced a session ID {session_id} that doesn't exist",
            )
        session.last_activity = time.monotonic()
        return session

    def delete_session(self, scale_set_id: int, session_id: str) -> None:
        self.session(scale_set_id, session_id)
        del self.sessions[scale_set_id]
        self._notify()

    def session_for_token(self, claims: dict[str, Any]) -> Session | None:
        """The live session an MQ token belongs to, if any."""
        scale_set_id = claims.get("ssid")
        if not isinstance(scale_set_id, int):
            return None
        session = self.live_session(scale_set_id)
        if session is None or session.id != claims.get("sid"):
            return None
        return session

    # --- message queue -------------------------------------------------------------------
    async def next_message(
        self, session: Session, last_message_id: int, capacity: int | None, within: float
    ) -> tuple[Message, Statistics] | None:
        """Long poll: the oldest unacked message past ``last_message_id``, or ``None``."""
        scale_set_id = session.scale_set_id
        session.polls_in_flight += 1
        session.last_activity = time.monotonic()
        try:
            if capacity is not None:
                self.scale_set(scale_set_id).max_capacity = capacity
                self._dispatch()
            deadline = time.monotonic() + within
            while True:
                if self.closing or self.sessions.get(scale_set_id) is not session:
                    return None
                found = self.queues.take(scale_set_id, last_message_id)
                if found is not None:
                    return found, self.statistics(scale_set_id)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                await self.wait_change(remaining)
        finally:
            session.polls_in_flight -= 1
            session.last_activity = time.monotonic()

    def delete_message(self, session: Session, message_id: int) -> None:
        session.last_activity = time.monotonic()
        self.queues.delete(session.scale_set_id, message_id)

    def acquirable_jobs(self, scale_set_id: int) -> list[Job]:
        self.scale_set(scale_set_id)
        return [
            j
            for j in self._open_jobs.values()
            if j.state is JobState.AVAILABLE and scale_set_id in j.offered_to
        ]

    def acquire_jobs(self, session: Session, request_ids: list[int]) -> list[int]:
        """First acquirer wins; ids beyond capacity or already taken are left out.

        A job left out for lack of room stays available and is offered to this set again (a
        new ``JobAvailable``) once it has room: upstream's listener acquires whatever a message
        offers and never asks again for the ids the answer lacks
        (docs/upstream-behaviour.md#listener-session).
        """
        session.last_activity = time.monotonic()
        scale_set = self.scale_set(session.scale_set_id)
        by_request = {j.runner_request_id: j for j in self._open_jobs.values()}
        active = self._active_counts()
        acquired: list[int] = []
        for request_id in request_ids:
            job = by_request.get(request_id)
            if job is None or job.state is not JobState.AVAILABLE:
                continue
            if scale_set.id not in job.offered_to:
                continue
            if not self._has_room(scale_set, active):
                job.reoffered_to.discard(scale_set.id)
                job.deferred_by.add(scale_set.id)
                continue
            job.offered_to.clear()
            job.deferred_by.clear()
            job.reoffered_to.clear()
            self._assign(job, scale_set)
            active[scale_set.id] += 1
            acquired.append(request_id)
        self._dispatch()
        return acquired

    # --- jobs ----------------------------------------------------------------------------
    def enqueue_job(
        self,
        labels: list[str],
        *,
        repository: str = "repo",
        owner: str = "example-org",
        workflow_ref: str | None = None,
        display_name: str = "build",
        event: str = "push",
        duration: float | None = None,
        result: str = "succeeded",
    ) -> Job:
        if not labels or not all(isinstance(x, str) and x for x in labels):
            raise ValueError("a job needs at least one non-empty label")
        if duration is not None and duration < 0:
            raise ValueError("duration must not be negative")
        ref = workflow_ref or f"{owner}/{repository}/.github/workflows/ci.yml@refs/heads/main"
        job = Job(
            job_id=str(uuid.uuid4()),
            runner_request_id=next(self._request_ids),
            labels=list(labels),
            repository=repository,
            owner=owner,
            workflow_ref=ref,
            display_name=display_name,
            event=event,
            workflow_run_id=next(self._run_ids),
            duration=duration,
            result=result,
            queue_time=utcnow(),
        )
        self.jobs[job.job_id] = job
        self._open_jobs[job.job_id] = job
        self._dispatch(new_job=job)
        return job

    def job(self, job_id: str) -> Job:
        found = self.jobs.get(job_id)
        if found is None:
            raise KeyError(f"no job {job_id}")
        return found

    def complete_job(self, job_id: str, result: str = "succeeded") -> Job:
        """End a job (the runner finished, or the workflow was cancelled)."""
        job = self.job(job_id)
        if job.state is JobState.COMPLETED:
            raise ValueError(f"job {job_id} already completed")
        self._cancel_timer(job_id)
        self._finish(job, result)
        self._dispatch()
        return job

    def cancel_job(self, job_id: str) -> Job:
        return self.complete_job(job_id, "canceled")

    def _active_counts(self) -> Counter[int]:
        """Assigned + running jobs per scale set, computed once per pass over the queue."""
        return Counter(
            j.scale_set_id
            for j in self._open_jobs.values()
            if j.state in _ACTIVE and j.scale_set_id is not None
        )

    @staticmethod
    def _has_room(scale_set: ScaleSet, active: Counter[int]) -> bool:
        return scale_set.max_capacity is None or active[scale_set.id] < scale_set.max_capacity

    def _emit(self, scale_set_id: int, kind: str, job: Job, **extra: Any) -> None:
        request_id = 0 if self._faults.zero_runner_request_ids and self.mode == "direct" else None
        acquire_url = f"{self._svc_url()}_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs"
        self.queues.emit(
            scale_set_id,
            job_message(kind, job, acquire_url=acquire_url, runner_request_id=request_id, **extra),
        )

    def _record_active(self, scale_set_id: int, delta: int) -> None:
        """One change of a scale set's ``assigned + running`` count, for :meth:`active_peak`."""
        self._active_now[scale_set_id] += delta
        self.active_log.append((scale_set_id, delta))

    def active_peak(self, weights: Mapping[int, float]) -> dict[str, float]:
        """The largest weighted sum of ``assigned + running`` jobs that the scale sets of
        ``weights`` (id -> weight: 1 counts jobs, a pod's CPU counts CPU) held together at any
        moment of the recorded history, the sum now, and the number of changes recorded."""
        total = peak = 0.0
        for scale_set_id, delta in self.active_log:
            weight = weights.get(scale_set_id)
            if weight is not None:
                total += delta * weight
                peak = max(peak, total)
        now = sum(self._active_now[i] * w for i, w in weights.items())
        return {"peak": peak, "now": now, "changes": len(self.active_log)}

    def _assign(self, job: Job, scale_set: ScaleSet) -> None:
        job.state = JobState.ASSIGNED
        job.scale_set_id = scale_set.id
        self._record_active(scale_set.id, 1)
        job.scale_set_assign_time = utcnow()
        self._emit(scale_set.id, "JobAssigned", job)
        if self.assign_timeout is not None:
            loop = asyncio.get_running_loop()
            attempt = job.attempt
            self._timers[job.job_id] = loop.call_later(
                self.assign_timeout, self._assign_expired, job.job_id, attempt
            )

    def _assign_expired(self, job_id: str, attempt: int) -> None:
        """No runner took the job in time: cancel this attempt and requeue (at most 3)."""
        self._timers.pop(job_id, None)
        job = self.jobs.get(job_id)
        if job is None or job.state is not JobState.ASSIGNED or job.attempt != attempt:
            return
        scale_set_id = job.scale_set_id
        assert scale_set_id is not None
        job.finish_time = utcnow()
        self._emit(scale_set_id, "JobCompleted", job, result="canceled")
        self._record_active(scale_set_id, -1)
        if job.attempt >= MAX_JOB_ATTEMPTS:
            job.state = JobState.COMPLETED
            job.final_result = "canceled"
            self._open_jobs.pop(job_id, None)
        else:
            self._requeue(job, new_attempt=True)
        self._dispatch()

    def _requeue(self, job: Job, *, new_attempt: bool) -> None:
        if new_attempt:
            job.attempt += 1
            job.runner_request_id = next(self._request_ids)
        job.state = JobState.QUEUED
        job.scale_set_id = None
        job.offered_to.clear()
        job.deferred_by.clear()
        job.reoffered_to.clear()
        job.scale_set_assign_time = None
        job.finish_time = None

    def _start(self, job: Job, runner: Runner) -> None:
        self._cancel_timer(job.job_id)
        job.state = JobState.RUNNING
        job.runner_id = runner.id
        job.runner_name = runner.name
        job.runner_assign_time = utcnow()
        runner.status = RunnerStatus.BUSY
        runner.job_id = job.job_id
        assert job.scale_set_id is not None
        self._emit(
            job.scale_set_id, "JobStarted", job, runner_id=runner.id, runner_name=runner.name
        )
        if job.duration is not None and runner.session_id is None:
            loop = asyncio.get_running_loop()
            self._timers[job.job_id] = loop.call_later(
                job.duration, self._auto_complete, job.job_id, runner.id
            )

    def _auto_complete(self, job_id: str, runner_id: int) -> None:
        self._timers.pop(job_id, None)
        job = self.jobs.get(job_id)
        if job is not None and job.state is JobState.RUNNING and job.runner_id == runner_id:
            self._finish(job, job.result)
            self._dispatch()

    def _finish(self, job: Job, result: str) -> None:
        job.finish_time = utcnow()
        job.final_result = result
        if job.scale_set_id is not None and job.state in _ACTIVE:
            self._record_active(job.scale_set_id, -1)
            self._emit(
                job.scale_set_id,
                "JobCompleted",
                job,
                result=result,
                runner_id=job.runner_id or 0,
                runner_name=job.runner_name,
            )
        if job.runner_id is not None:
            # JIT runners are ephemeral: the runner leaves with its job.
            self.runners.pop(job.runner_id, None)
        job.state = JobState.COMPLETED
        job.offered_to.clear()
        job.deferred_by.clear()
        job.reoffered_to.clear()
        self._open_jobs.pop(job.job_id, None)

    def _cancel_timer(self, job_id: str) -> None:
        timer = self._timers.pop(job_id, None)
        if timer is not None:
            timer.cancel()

    def _dispatch(self, new_job: Job | None = None) -> None:
        """Move work forward: offer or assign queued jobs, start assigned jobs on idle runners.

        After a plain enqueue only ``new_job`` can move (every other change already ran a full
        pass), which keeps a large backlog cheap to grow.
        """
        ordered = sorted(self.scale_sets.values(), key=lambda s: s.id)
        active = self._active_counts()
        # Offers made again and not answered yet take room, so a slot is offered only once. A
        # new job has never been deferred: its pass needs no count.
        reoffered: Counter[int] = Counter(
            ()
            if new_job is not None
            else (set_id for j in self._open_jobs.values() for set_id in j.reoffered_to)
        )
        candidates = [new_job] if new_job is not None else list(self._open_jobs.values())
        for job in candidates:
            if job.state is JobState.QUEUED or (
                job.state is JobState.AVAILABLE and self.mode == "acquire"
            ):
                self._place(job, [s for s in ordered if job.matches(s)], active, reoffered)
        idle = sorted(
            (r for r in self.runners.values() if r.status is RunnerStatus.IDLE),
            key=lambda r: r.id,
        )
        for runner in idle:
            waiting = next(
                (
                    j
                    for j in self._open_jobs.values()
                    if j.state is JobState.ASSIGNED and j.scale_set_id == runner.scale_set_id
                ),
                None,
            )
            if waiting is not None:
                self._start(waiting, runner)
        self._notify()

    def _place(
        self,
        job: Job,
        candidates: list[ScaleSet],
        active: Counter[int],
        reoffered: Counter[int],
    ) -> None:
        if self.mode == "acquire":
            # Offered to every matching set that listens; assigned only once acquired.
            for scale_set in candidates:
                if self.live_session(scale_set.id) is None:
                    continue
                if scale_set.id in job.deferred_by:
                    self._offer_again(job, scale_set, active, reoffered)
                    continue
                if scale_set.id in job.offered_to:
                    continue
                job.offered_to.add(scale_set.id)
                job.state = JobState.AVAILABLE
                self._emit(scale_set.id, "JobAvailable", job)
            return
        with_room = [s for s in candidates if self._has_room(s, active)]
        with_room.sort(key=lambda s: (self.live_session(s.id) is None, s.id))
        if with_room:
            self._assign(job, with_room[0])
            active[with_room[0].id] += 1

    def _offer_again(
        self, job: Job, scale_set: ScaleSet, active: Counter[int], reoffered: Counter[int]
    ) -> None:
        """A job this set could not acquire while full: offer it again, oldest first, as many
        as the set has room for in this pass."""
        capacity = scale_set.max_capacity
        if capacity is not None and active[scale_set.id] + reoffered[scale_set.id] >= capacity:
            return
        job.deferred_by.discard(scale_set.id)
        job.reoffered_to.add(scale_set.id)
        reoffered[scale_set.id] += 1
        self._emit(scale_set.id, "JobAvailable", job)

    # --- runners -------------------------------------------------------------------------
    def generate_jit_config(self, scale_set_id: int, body: Any) -> tuple[Runner, str]:
        self.scale_set(scale_set_id)
        if not isinstance(body, dict):
            raise ServiceError(400, TypeNames.ARGUMENT, "request body must be a JSON object")
        data = lower_keys(body)
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ServiceError(400, TypeNames.ARGUMENT, "runner name is required")
        work_folder = data.get("workfolder") or ""
        if any(r.name.lower() == name.lower() for r in self.runners.values()):
            raise ServiceError(
                409, TypeNames.AGENT_EXISTS, f"A runner with the name {name} already exists."
            )
        runner = Runner(
            id=next(self._runner_ids),
            name=name,
            scale_set_id=scale_set_id,
            work_folder=str(work_folder),
            secret=secrets.token_urlsafe(24),
        )
        self.runners[runner.id] = runner
        return runner, encode_jit_config(runner, self._svc_url())

    def _runner_from_jit(self, encoded: str) -> Runner:
        runner_id, secret = decode_jit_config(encoded)
        runner = self.runners.get(runner_id)
        if runner is None:
            raise JitConfigError(f"runner {runner_id} is not registered (removed or finished)")
        if not secrets.compare_digest(runner.secret, secret):
            raise JitConfigError(f"the JIT config does not belong to runner {runner_id}")
        return runner

    def connect_runner(self, encoded_jit_config: str) -> RunnerConnection:
        """A runner process starts with its JIT config: online-idle, then takes a job if any."""
        runner = self._runner_from_jit(encoded_jit_config)
        if runner.status is RunnerStatus.CONFIGURED:
            runner.status = RunnerStatus.IDLE
        self._dispatch()
        return RunnerConnection(runner.id, runner.name, runner.scale_set_id, runner.job_id)

    # --- the runner's own side (runner_routes.py) -----------------------------------------
    def runner_by_credentials(self, client_id: str, client_secret: str) -> Runner | None:
        """The registered runner these JIT credentials belong to, else ``None``."""
        try:
            runner = self.runners.get(int(client_id))
        except ValueError:
            return None
        if runner is None or not secrets.compare_digest(runner.secret, client_secret):
            return None
        return runner

    def open_runner_session(self, runner: Runner) -> str:
        """The runner listens for its job: online-idle, and it reports the job's end itself."""
        runner.session_id = str(uuid.uuid4())
        if runner.status is RunnerStatus.CONFIGURED:
            runner.status = RunnerStatus.IDLE
        self._dispatch()
        return runner.session_id

    def close_runner_session(self, runner: Runner) -> None:
        """The runner went offline: it takes no job until it opens a session again, and a job
        started on it that it never reported begun (it left before reading its message) goes
        back to its scale set, assigned, for another runner."""
        runner.session_id = None
        job = self.jobs.get(runner.job_id) if runner.job_id is not None else None
        if job is not None and job.state is JobState.RUNNING and job.runner_id == runner.id:
            self._cancel_timer(job.job_id)
            job.state = JobState.ASSIGNED
            job.runner_id, job.runner_name, job.runner_assign_time = None, "", None
        runner.job_id = None
        runner.status = RunnerStatus.CONFIGURED
        self._dispatch()

    def finish_runner_job(self, runner: Runner, job_id: str, result: str) -> Job:
        """The runner reports the end of the job it holds."""
        job = self.job(job_id)
        if job.state is not JobState.RUNNING or job.runner_id != runner.id:
            raise ServiceError(
                409, TypeNames.ARGUMENT, f"job {job_id} is not running on runner {runner.id}"
            )
        return self.complete_job(job_id, result)

    async def wait_for_runner_job(self, runner_id: int, within: float) -> str | None:
        deadline = time.monotonic() + within
        while True:
            runner = self.runners.get(runner_id)
            if runner is None:
                raise JitConfigError(f"runner {runner_id} is gone")
            if runner.job_id is not None:
                return runner.job_id
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closing:
                return None
            await self.wait_change(remaining)

    async def wait_for_job_state(
        self, job_id: str, states: set[JobState], within: float
    ) -> Job | None:
        deadline = time.monotonic() + within
        while True:
            job = self.job(job_id)
            if job.state in states:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closing:
                return None
            await self.wait_change(remaining)

    def runner(self, runner_id: int) -> Runner:
        found = self.runners.get(runner_id)
        if found is None:
            raise ServiceError(
                404, TypeNames.AGENT_NOT_FOUND, f"No runner with id {runner_id} was found."
            )
        return found

    def runners_named(self, name: str) -> list[Runner]:
        """Case-insensitive, as the name conflict of :meth:`generate_jit_config` is: a client
        that got ``AgentExistsException`` for a name finds the runner holding it."""
        return [r for r in self.runners.values() if r.name.lower() == name.lower()]

    def remove_runner(self, runner_id: int) -> None:
        runner = self.runner(runner_id)
        if runner.status is RunnerStatus.BUSY:
            raise ServiceError(
                409,
                TypeNames.JOB_STILL_RUNNING,
                f"Runner {runner.name} cannot be removed while it is running job {runner.job_id}.",
            )
        del self.runners[runner_id]
        self._notify()

    # --- introspection -------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        jobs = Counter(j.state.value for j in self.jobs.values())
        runners = Counter(r.status.value for r in self.runners.values())
        return {
            "mode": self.mode,
            "scale_sets": len(self.scale_sets),
            "sessions": sum(1 for s in list(self.sessions) if self.live_session(s)),
            "jobs": {state.value: jobs.get(state.value, 0) for state in JobState},
            "runners": {status.value: runners.get(status.value, 0) for status in RunnerStatus},
        }

    def snapshot(self) -> dict[str, Any]:
        """Everything a test may want to assert on; no token or JIT config inside."""
        scale_sets = []
        for scale_set in sorted(self.scale_sets.values(), key=lambda s: s.id):
            session = self.live_session(scale_set.id)
            entry = self.scale_set_wire(scale_set)
            entry["maxCapacity"] = scale_set.max_capacity
            entry["pollsReceived"] = scale_set.polls_received
            entry["session"] = (
                None if session is None else {"sessionId": session.id, "ownerName": session.owner}
            )
            entry["queue"] = self.queues.snapshot(scale_set.id)
            scale_sets.append(entry)
        return {
            "mode": self.mode,
            "runnerGroups": [g.to_wire(self.group_size(g.id)) for g in self.groups.values()],
            "scaleSets": scale_sets,
            "jobs": [j.to_public() for j in self.jobs.values()],
            "runners": [
                {**r.to_wire(), "status": r.status.value, "jobId": r.job_id}
                for r in self.runners.values()
            ],
        }

    def shutdown(self) -> None:
        self.closing = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._notify()
