"""The scaling decision of one scale set: GitHub's statistics and job batches -> the desired
runner count, written by the ERS writer, the runner-status writer and the decision event.

Everything reaches it one way: its session pump calls it, in order, in the pump's own task
(ADR 0104): the session's statistics before the first long poll, each job batch after
JetStream stored it and before GitHub's ack, the statistics of each empty poll, and a
change of the set's shared capacity. Nothing is read back from the stream, so no number a
publisher chooses is trusted: a batch's stream sequence is the one JetStream's PubAck gave
the pump, and a batch at or below the last one decided (restored from the last
``scale.decision``'s headers after a restart) is not scaled again; its ``JobStarted`` status
patches (idempotent) are re-applied.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from nats.js import JetStreamContext
from opentelemetry import trace

from arcflow.common.events import JobInfo, JobsBatch, JobStatistics
from arcflow.common.schedules import effective_minimum, utc_now
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision_event import DECISION_HEARTBEAT, DecisionPublisher, Watermark
from arcflow.listener.ers_writer import ErsWriter
from arcflow.listener.metrics import ScaleSetRecorder
from arcflow.listener.refusals import StopRefusals
from arcflow.listener.runner_status import KubePatcher, RunnerStatusWriter
from arcflow.listener.scaler import Decision, DesiredRunnerScaler

if TYPE_CHECKING:  # only sets with a shared capacity import it (ADR 0074)
    import asyncio

    from arcflow.listener.capacity import CapacityBoard

log = logging.getLogger("arcflow.listener.decision")
_tracer = trace.get_tracer("arcflow.listener")


class ImplausibleBatchError(ValueError):
    """A batch the decision will not act on (its reason is logged; GitHub's ack follows)."""


class ScaleDecider:
    """``HandleDesiredRunnerCount`` for one scale set, and what it writes."""

    def __init__(
        self,
        target: ScaleSetTarget,
        ers: ErsWriter,
        runners: RunnerStatusWriter,
        publisher: DecisionPublisher,
        recorder: ScaleSetRecorder | None = None,
        capacity: CapacityBoard | None = None,
        wall_clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.target = target
        self.scaler = DesiredRunnerScaler(target.min_runners, target.max_runners)
        self.ers = ers
        self._runners = runners
        self.publisher = publisher
        self._recorder = recorder
        self._capacity = capacity
        #: The time scheduledOverrides are evaluated at (ADR 0063).
        self._wall_clock = wall_clock
        #: The last batch decided; ``handled_seq`` its stream sequence (JetStream's number).
        self.watermark: Watermark | None = None
        self.handled_seq = 0
        self.decisions: list[Decision] = []
        #: Batches at or below ``handled_seq``: not scaled again.
        self.skipped_batches = 0
        #: Batches that completed no job and left the count unchanged: no ERS patch (ADR 0043).
        self.unchanged_batches = 0

    async def restore(self) -> None:
        """Resume after the batch the last published decision names (before each session)."""
        mark = await self.publisher.last_mark()
        if mark is not None and mark.stream_seq > self.handled_seq:
            self.watermark, self.handled_seq = mark, mark.stream_seq
            log.info("%s resumes after stream sequence %d", self.target.label, self.handled_seq)

    def session_closed(self) -> None:
        """The pump's session ended (ADR 0065: ``arcflow_listener_session_open`` 0)."""
        if self._recorder is not None:
            self._recorder.record_session_closed()

    async def statistics(self, stats: JobStatistics, reason: str) -> Decision:
        """Statistics seen without a message: the session's are always published, the rest
        when they change something or the heartbeat is due (ADR 0061). A session's patch is
        always written; an empty poll's, which completes no job, is skipped like such a batch
        when it leaves the count as written within the window (ADR 0043, amendment in ADR
        0104): a new patchID for an unchanged count is a new scale request, and the runner
        set would top up runners whose jobs finished while GitHub still counts them."""
        with _tracer.start_as_current_span(
            "scale.decision",
            attributes={"scale_set.id": self.target.scale_set_id, "reason": reason},
        ):
            session = reason == "session"
            return await self._decide(
                stats, reason=reason, always_publish=session, may_skip=not session
            )

    async def batch(self, batch: JobsBatch, stream_seq: int = 0) -> Decision | None:
        """One GitHub message, stored at ``stream_seq``: the completed jobs' runners, the ERS
        patch, the started jobs' runners and the decision; ``None`` when it was decided
        before."""
        _check_plausible(batch)
        started = [j for j in batch.jobs if j.message_type == "JobStarted"]
        completed = [j for j in batch.jobs if j.message_type == "JobCompleted"]
        if stream_seq and stream_seq <= self.handled_seq:
            log.info(
                "message %d of %s already handled (stream sequence %d); not scaling again",
                batch.message_id,
                self.target.label,
                stream_seq,
            )
            await self._runners.write([*started, *completed])
            self.skipped_batches += 1
            return None
        state = (self.scaler.target, self.scaler.patch_seq, self.scaler.dirty)
        mark = Watermark(batch.scale_set_id, batch.message_id, batch.session_id, stream_seq)
        with _tracer.start_as_current_span(
            "scale.decision",
            attributes={
                "scale_set.id": self.target.scale_set_id,
                "github.message_id": batch.message_id,
            },
        ):
            try:
                for _job in started:
                    self.scaler.job_started()
                for _job in completed:
                    self.scaler.job_completed()
                decision = await self._decide(
                    batch.statistics,
                    reason=f"message {batch.message_id}",
                    mark=mark,
                    started=started,
                    completed=completed,
                    may_skip=not completed,
                )
            except BaseException:
                # A redelivered batch must see the scaler as it was before this attempt.
                self.scaler.target, self.scaler.patch_seq, self.scaler.dirty = state
                raise
        self._record_jobs(batch.jobs)
        self.watermark = mark
        self.handled_seq = max(self.handled_seq, stream_seq)
        return decision

    def _record_jobs(self, jobs: Sequence[JobInfo]) -> None:
        recorder = self._recorder
        if recorder is None:
            return
        for job in jobs:  # the ERS patch for them is written (ADR 0065)
            if job.message_type == "JobAssigned":
                recorder.record_job_assigned(job, self.ers.requested_at)
            elif job.message_type == "JobStarted":
                recorder.record_job_started(job)
            elif job.message_type == "JobCompleted":
                recorder.record_job_completed(job)

    async def _decide(
        self,
        stats: JobStatistics,
        *,
        reason: str,
        mark: Watermark | None = None,
        started: Sequence[JobInfo] = (),
        completed: Sequence[JobInfo] = (),
        may_skip: bool = False,
        always_publish: bool = True,
    ) -> Decision:
        """Scaler; the completed jobs on their runners, then the ERS patch, then the started
        jobs' runner status and the decision event. ``may_skip``: a batch that completed no
        job sends no ERS patch when its count is the one written within the window (ADR 0043).

        A completed job is written first: the runner set does not count a runner whose job is
        done (ADR 0110), and this patch's count no longer includes that job; written after,
        the set could count the finishing runner against the new count and create nothing."""
        if self._recorder is not None:
            self._recorder.record_statistics(stats)
        standing = self.ers.standing() if may_skip else None
        reason = self._apply_schedule(reason)
        ers = self.target.ephemeral_runner_set_name
        cap = None if self._capacity is None else self._capacity.runner_cap(ers)
        decision = self.scaler.decide(
            stats.total_assigned_jobs, unchanged_since=standing, capacity=cap
        )
        await self._runners.write(completed)
        if decision.skipped:
            self.unchanged_batches += 1
            reason = f"{reason}; count unchanged, no job completed: ERS not patched"
            await self.ers.write_share()
        else:
            await self.ers.write(decision)
        self._record_decision(decision)
        await self._runners.write(started)
        minimum = self.scaler.min_runners
        if not always_publish and not self.publisher.due(decision, minimum):
            self.publisher.unpublished += 1
            return decision
        await self.publisher.publish(
            decision, reason=reason, minimum=minimum, mark=mark or self.watermark
        )
        log.info(
            "%s: desired %d runners (patchID %d, %d assigned jobs, %s)",
            self.target.label,
            decision.target,
            decision.patch_id,
            decision.assigned_jobs,
            reason,
        )
        return decision

    def _record_decision(self, decision: Decision) -> None:
        self.decisions.append(decision)
        del self.decisions[:-100]
        recorder, board = self._recorder, self._capacity
        if recorder is None:
            return
        recorder.record_desired(decision.target)
        if board is not None:
            ers = self.target.ephemeral_runner_set_name
            allocation = board.allocation
            recorder.record_capacity(
                board.share(ers),
                board.report(ers).advertised,
                {k: float(v) for k, v in allocation.total.items()},
                {k: float(v) for k, v in allocation.used.items()},
            )

    def _apply_schedule(self, reason: str) -> str:
        """The minimum from the scheduled overrides open now (ADR 0063), on every decision,
        so a window opens or closes on the next statistics with no restart."""
        overrides = self.target.scheduled_overrides
        if not overrides:
            return reason
        scaler = self.scaler
        base = self.target.min_runners
        effective = effective_minimum(base, scaler.max_runners, overrides, self._wall_clock())
        if effective.min_runners != scaler.min_runners:
            log.info(
                "%s: minimum %d -> %d (%s)",
                self.target.label,
                scaler.min_runners,
                effective.min_runners,
                effective.override or "no scheduled override open",
            )
            if self._recorder is not None:
                self._recorder.record_static(effective.min_runners, scaler.max_runners)
        scaler.set_minimum(effective.min_runners)
        if effective.override:
            return f"{reason}; minimum {effective.min_runners} from {effective.override}"
        return reason


def _check_plausible(batch: JobsBatch) -> None:
    if batch.message_id < 1:
        raise ImplausibleBatchError(f"message id {batch.message_id} is not positive")
    negative = [k for k, v in batch.statistics.model_dump().items() if v < 0]
    if negative:
        raise ImplausibleBatchError(f"negative statistics: {', '.join(sorted(negative))}")


def decider_for(
    target: ScaleSetTarget,
    js: JetStreamContext,
    kube: KubePatcher,
    *,
    recorder: ScaleSetRecorder | None = None,
    capacity: CapacityBoard | None = None,
    stopping: asyncio.Event | None = None,
    heartbeat: float = DECISION_HEARTBEAT,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], datetime] = utc_now,
) -> ScaleDecider:
    """The decision of ``target`` and its three writers, wired (one call per scale set)."""
    refusals = StopRefusals(target.label, stopping)
    ers = ErsWriter(
        target.ephemeral_runner_set_name,
        target.namespace,
        kube,
        refusals,
        capacity,
        clock=clock,
        wall_clock=wall_clock,
    )
    return ScaleDecider(
        target,
        ers,
        RunnerStatusWriter(target.namespace, kube, refusals, wall_clock),
        DecisionPublisher(target, js, heartbeat=heartbeat, clock=clock),
        recorder,
        capacity,
        wall_clock,
    )
