"""The worker of one scale set: JetStream job batches -> scaler -> ERS patch -> decision event.

Redelivery and forged batches (ADR 0014). The worker trusts no number a publisher chooses:

- **JetStream's own sequence**: the highest stream sequence it fully handled (restored at start
  from the durable consumer's ack floor and from the last ``scale.decision``, if that one is
  not beyond the stream's end). A redelivery at or below it is not scaled again; its
  ``JobStarted`` runner patches (idempotent merge patches) are re-applied.
- **De-duplication**: the pump publishes with ``Nats-Msg-Id`` ``jobs.batch:<set>:<message>``,
  so a GitHub redelivery inside JetStream's duplicate window is stored once.
- **GitHub message ids compare only within one session** (``JobsBatch.session_id``): a late
  copy of a message at or below the highest id handled *in its own session* is not scaled
  again; an id from one session never blocks another session.
- **Implausible batches are dead-lettered with their reason**: another scale set's batch, a
  message id below 1, negative statistics, a batch claiming the live session that this
  process's pump did not publish at that stream sequence (:class:`SessionLedger`), and a batch
  of another session stored after the live session's first publish (sessions of one scale
  set never overlap).

Each batch is handled under :class:`EventConsumer`'s deadline, as every subscription handler
is (80 % of the consumer's ack wait): a call that overruns (a Kubernetes write that hangs) is
abandoned and the batch redelivered, which the rules above make safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from opentelemetry import trace

from arcflow.common.constants import ANNOTATION_CAPACITY_SHARE
from arcflow.common.events import (
    EventBase,
    JobInfo,
    JobsBatch,
    JobStatistics,
    ScaleDecision,
)
from arcflow.common.kube.errors import ForbiddenError, NotFoundError
from arcflow.common.nats import (
    STREAM_JOBS,
    STREAM_SCALE,
    Delivery,
    EventConsumer,
    PermanentEventError,
    ensure_consumer,
    publish_event,
)
from arcflow.common.schedules import effective_minimum, utc_now
from arcflow.common.service.fetch import bind_pull, fetch_batches
from arcflow.common.stages import ANNOTATION_SCALE_REQUESTED_AT, request_stamp
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.ledger import SessionLedger
from arcflow.listener.metrics import ScaleSetRecorder
from arcflow.listener.pump import SOURCE, StatisticsTick
from arcflow.listener.scaler import Decision, DesiredRunnerScaler, ers_patch, runner_status_patch

if TYPE_CHECKING:  # only sets with a shared capacity import it (ADR 0074)
    from arcflow.listener.capacity import CapacityBoard

log = logging.getLogger("arcflow.listener.worker")
_tracer = trace.get_tracer("arcflow.listener")

MESSAGE_ID_HEADER = "Arcflow-Github-Message-Id"
SCALE_SET_ID_HEADER = "Arcflow-Scale-Set-Id"
SESSION_ID_HEADER = "Arcflow-Session-Id"
JOBS_SEQ_HEADER = "Arcflow-Jobs-Stream-Seq"
#: Sessions whose highest handled message id is remembered.
SESSION_MARKS = 64
#: An ERS patch identical to the previous one is not sent again within this many seconds.
IDENTICAL_PATCH_WINDOW = 5.0
#: A batch that completed no job and leaves the count as last written sends no ERS patch
#: within this many seconds of that write (ADR 0043); after it, the batch patches as upstream.
UNCHANGED_BATCH_WINDOW = 30.0
#: How long a session's initial decision waits for the worker's restore before it is queued.
RESTORE_WAIT = 30.0
#: A statistics tick whose decision changes nothing is published at most this often (ADR 0061).
DECISION_HEARTBEAT = 60.0


T = TypeVar("T")


class KubePatcher(Protocol):
    """The two Kubernetes writes a worker makes."""

    async def patch_merge(
        self, resource: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any: ...

    async def patch_status(
        self, resource: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any: ...


async def _retry_timeouts(call: Callable[[], Awaitable[T]], attempts: int = 5) -> T:
    """JetStream API calls at start-up time out when the server is busy: retry a few times."""
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except TimeoutError:
            if attempt == attempts:
                raise
            log.warning("JetStream request timed out; retrying in %.1fs", delay)
            await asyncio.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Watermark:
    """The last batch fully handled: its session, GitHub message id and stream sequence."""

    scale_set_id: int
    message_id: int
    session_id: str = ""
    stream_seq: int = 0


class ImplausibleBatchError(PermanentEventError):
    """A batch the worker will not act on; it is dead-lettered with this reason."""


class ScaleSetWorker:
    """Consumes one scale set's batches and ticks; owns its scaler's I/O."""

    def __init__(
        self,
        target: ScaleSetTarget,
        js: JetStreamContext,
        kube: KubePatcher,
        scaler: DesiredRunnerScaler,
        recorder: ScaleSetRecorder | None = None,
        *,
        fetch_timeout: float = 5.0,
        batch_size: int = 16,
        ledger: SessionLedger | None = None,
        puback_wait: float = 10.0,
        identical_patch_window: float = IDENTICAL_PATCH_WINDOW,
        unchanged_batch_window: float = UNCHANGED_BATCH_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        restore_wait: float = RESTORE_WAIT,
        decision_heartbeat: float = DECISION_HEARTBEAT,
        wall_clock: Callable[[], datetime] = utc_now,
        capacity: CapacityBoard | None = None,
    ) -> None:
        self.target = target
        #: The set's shared capacity (ADR 0062): caps the count, reports the share on the ERS.
        self._capacity = capacity
        self._reported_share: str | None = None
        if capacity is not None:
            capacity.subscribe(target.ephemeral_runner_set_name, self.nudge)
        self._js = js
        self._kube = kube
        self.scaler = scaler
        self._recorder = recorder
        self._fetch_timeout = fetch_timeout
        self._batch_size = batch_size
        self.ledger = ledger if ledger is not None else SessionLedger()
        self._puback_wait = puback_wait
        self._identical_window = identical_patch_window
        self._unchanged_window = unchanged_batch_window
        self._clock = clock
        #: The time scheduledOverrides are evaluated at (ADR 0063); injectable for tests.
        self._wall_clock = wall_clock
        #: The configured minimum; a scheduled override replaces it while its window is open.
        self._base_min = scaler.min_runners
        self._lock = asyncio.Lock()
        self._tick: StatisticsTick | None = None
        self._tick_event = asyncio.Event()
        self._last_patch: tuple[dict[str, Any], float] | None = None
        #: The request the ERS holds from this worker: (replicas, patchID, when written).
        self._written: tuple[int, int, float] | None = None
        #: The stamp (wall-clock send time) of the request the ERS holds from this worker: a
        #: skipped decision's jobs were asked for by it (ADR 0065). None after a failed write.
        self._requested_at: float | None = None
        #: Highest jobs-stream sequence fully handled (JetStream's number, not a publisher's).
        self.handled_seq = 0
        #: Per GitHub session: the highest message id fully handled in it.
        self.session_marks: OrderedDict[str, int] = OrderedDict()
        self.watermark: Watermark | None = None
        self.decisions: list[Decision] = []
        self.skipped_batches = 0
        self.dead_lettered = 0
        self.patches_skipped = 0
        #: Batches that completed no job and left the count unchanged: no ERS patch (ADR 0043).
        self.unchanged_batches = 0
        #: Batches scaled from a later message's statistics (the pump was ahead).
        self.fresher_statistics = 0
        #: Set when the process stops (the ``stop`` of :meth:`run`).
        self.stopping: asyncio.Event | None = None
        #: Writes refused 403 while stopping, taken as done (the listener's RBAC is going).
        self.refused_while_stopping = 0
        #: Set once :meth:`run` restored its watermark (the session's decision waits for it).
        self._restored = asyncio.Event()
        self._restore_wait = restore_wait
        #: ADR 0061: (desired replicas, patchID, minimum) of the last published decision, and
        #: when.
        self._heartbeat = decision_heartbeat
        self._published: tuple[int, int, int] | None = None
        self._published_at = 0.0
        #: Idle decisions not published (they changed nothing, within the heartbeat).
        self.decisions_unpublished = 0

    # --- inputs -----------------------------------------------------------------------
    def post_tick(self, tick: StatisticsTick) -> None:
        """Latest statistics from the pump; only the newest pending one is applied."""
        self._tick = tick
        self._tick_event.set()

    def nudge(self) -> None:
        """The share changed: decide again from the newest statistics."""
        if self._tick is not None:
            self._tick_event.set()

    # --- run --------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self.stopping = stop
        spec = self.target.consumer_spec()
        await _retry_timeouts(lambda: ensure_consumer(self._js, spec))
        await _retry_timeouts(self._restore)
        self._restored.set()
        consumer = EventConsumer(
            spec,
            self._handle_event,
            service=SOURCE,
            event_types=(JobsBatch,),
            dead_letter_target=self._js,
        )
        subscription = await _retry_timeouts(lambda: bind_pull(self._js, spec))
        ticks = asyncio.ensure_future(self._tick_loop())
        batches = fetch_batches(
            subscription,
            batch=self._batch_size,
            wait_seconds=self._fetch_timeout,
            stop=stop,
            beside=ticks,  # a failed tick ends the worker (supervised)
        )
        try:
            async with contextlib.aclosing(batches):
                async for messages in batches:
                    for msg in messages:
                        await consumer.process(msg)
        finally:
            ticks.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ticks
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def _tick_loop(self) -> None:
        while True:
            await self._tick_event.wait()
            self._tick_event.clear()
            tick = self._tick
            if tick is None:
                continue
            await self.apply_tick(tick)

    async def initial_decision(self, tick: StatisticsTick) -> Decision | None:
        """The session's statistics, decided (ERS patched, decision published) for the pump
        before its first long poll (docs/upstream-behaviour.md#listener-session).

        It waits for :meth:`run` to restore the watermark first, so this decision carries the
        last handled batch's headers and a restarted worker still finds them; a worker that
        cannot restore within ``restore_wait`` gets the tick queued instead (the old order:
        decided as soon as the worker runs) rather than holding the session's polls."""
        try:
            await asyncio.wait_for(self._restored.wait(), self._restore_wait)
        except TimeoutError:
            log.warning(
                "%s: worker not ready after %.0fs; the session's statistics are queued and the "
                "first long poll is not held for them",
                self.target.label,
                self._restore_wait,
            )
            self.post_tick(tick)
            return None
        return await self.apply_tick(tick)

    # --- handlers ---------------------------------------------------------------------
    async def apply_tick(self, tick: StatisticsTick) -> Decision | None:
        """``HandleDesiredRunnerCount`` for statistics seen without a message."""
        async with self._lock:
            if self.session_marks.get(tick.session_id, -1) > tick.last_message_id:
                return None  # a newer batch of this session already decided
            with _tracer.start_as_current_span(
                "scale.decision",
                attributes={"scale_set.id": self.target.scale_set_id, "reason": tick.reason},
            ):
                # A new session's decision is always published; an idle one only when it
                # changes something or the heartbeat is due (ADR 0061).
                return await self._decide(
                    tick.statistics, reason=tick.reason, always_publish=tick.reason == "session"
                )

    async def _handle_event(self, event: EventBase, delivery: Delivery) -> None:
        if isinstance(event, JobsBatch):
            try:
                await self.handle_batch(event, delivery.stream_sequence)
            except ImplausibleBatchError:
                self.dead_lettered += 1
                raise

    async def check_plausible(self, batch: JobsBatch, stream_seq: int | None) -> None:
        """Raise :class:`ImplausibleBatchError` (dead letter) for a batch not to act on."""
        target = self.target
        if batch.scale_set_id != target.scale_set_id:
            raise ImplausibleBatchError(
                f"batch of scale set {batch.scale_set_id} on the subject of scale set "
                f"{target.scale_set_id}"
            )
        if batch.message_id < 1:
            raise ImplausibleBatchError(f"message id {batch.message_id} is not positive")
        negative = [k for k, v in batch.statistics.model_dump().items() if v < 0]
        if negative:
            raise ImplausibleBatchError(f"negative statistics: {', '.join(sorted(negative))}")
        if stream_seq is None:
            return
        live = self.ledger.session_id
        if live is not None and batch.session_id == live:
            seq = await self.ledger.stream_seq_of(batch.message_id, self._puback_wait)
            if seq is None and self.ledger.too_old_to_tell(stream_seq):
                return
            if seq != stream_seq:
                raise ImplausibleBatchError(
                    f"claims the live session but this listener did not publish message "
                    f"{batch.message_id} at stream sequence {stream_seq}"
                )
            return
        first = self.ledger.first_seq
        if live is not None and first is not None and stream_seq > first:
            raise ImplausibleBatchError(
                f"batch of another session stored at sequence {stream_seq}, after the live "
                f"session began at {first}"
            )

    def session_closed(self) -> None:
        """The pump's session ended (ADR 0065: ``arcflow_listener_session_open`` 0)."""
        if self._recorder is not None:
            self._recorder.record_session_closed()

    async def handle_batch(
        self, batch: JobsBatch, stream_seq: int | None = None
    ) -> Decision | None:
        """One GitHub message: ERS patch first, then runner status patches and the decision."""
        target = self.target
        async with self._lock:
            await self.check_plausible(batch, stream_seq)
            started = [j for j in batch.jobs if j.message_type == "JobStarted"]
            completed = [j for j in batch.jobs if j.message_type == "JobCompleted"]
            seen = stream_seq is not None and stream_seq <= self.handled_seq
            session_mark = self.session_marks.get(batch.session_id) if batch.session_id else None
            if seen or (session_mark is not None and batch.message_id <= session_mark):
                log.info(
                    "message %d of %s already handled (%s); not scaling again",
                    batch.message_id,
                    target.label,
                    f"stream sequence {stream_seq}"
                    if seen
                    else f"session watermark {session_mark}",
                )
                await self._patch_runners(started)
                self.skipped_batches += 1
                return None
            state = (self.scaler.target, self.scaler.patch_seq, self.scaler.dirty)
            with _tracer.start_as_current_span(
                "scale.decision",
                attributes={
                    "scale_set.id": target.scale_set_id,
                    "github.message_id": batch.message_id,
                },
            ):
                try:
                    for _job in started:
                        self.scaler.job_started()
                    for _job in completed:
                        self.scaler.job_completed()
                    mark = Watermark(
                        batch.scale_set_id, batch.message_id, batch.session_id, stream_seq or 0
                    )
                    statistics, reason = self._freshest(batch)
                    decision = await self._decide(
                        statistics,
                        reason=reason,
                        mark=mark,
                        runners=started,
                        may_skip=not completed,
                    )
                except BaseException:
                    # A retried batch must see the scaler as it was before this attempt.
                    self.scaler.target, self.scaler.patch_seq, self.scaler.dirty = state
                    raise
            if self._recorder is not None:
                for job in batch.jobs:  # the ERS patch for them is written (ADR 0065)
                    if job.message_type == "JobAssigned":
                        self._recorder.record_job_assigned(job, self._requested_at)
                for job in started:
                    self._recorder.record_job_started(job)
                for job in completed:
                    self._recorder.record_job_completed(job)
            self._remember(mark)
            return decision

    def _freshest(self, batch: JobsBatch) -> tuple[JobStatistics, str]:
        """The statistics to scale from for ``batch`` (ADR 0028): GitHub's newest for its
        session when the pump already received a later message, else the batch's own.

        A batch waits in the stream while the worker handles the ones before it; its
        statistics (say "20 assigned jobs") can describe jobs that finished since, whose
        runners are gone, and the ERS would create runners for them. The pump's newest
        statistics are GitHub's count at its latest poll; the jobs of the batches in between
        are still handled one by one.
        """
        reason = f"message {batch.message_id}"
        newer = self.ledger.newer_statistics(batch.session_id, batch.message_id)
        if newer is None:
            return batch.statistics, reason
        self.fresher_statistics += 1
        return newer.statistics, f"{reason} (statistics of message {newer.message_id})"

    def _remember(self, mark: Watermark) -> None:
        self.watermark = mark
        self.handled_seq = max(self.handled_seq, mark.stream_seq)
        if mark.session_id:
            previous = self.session_marks.pop(mark.session_id, 0)
            self.session_marks[mark.session_id] = max(previous, mark.message_id)
            while len(self.session_marks) > SESSION_MARKS:
                self.session_marks.popitem(last=False)

    async def _decide(
        self,
        stats: JobStatistics,
        *,
        reason: str,
        mark: Watermark | None = None,
        runners: Sequence[JobInfo] = (),
        may_skip: bool = False,
        always_publish: bool = True,
    ) -> Decision:
        """Scaler, then the ERS patch (the first write), then the JobStarted runner patches
        and the decision event concurrently.

        ``may_skip``: a batch that completed no job sends no ERS patch when its count is the
        one this worker wrote within the window (ADR 0043); statistics ticks never skip (they
        are upstream's self-correction).

        ``always_publish=False`` (idle ticks): the ``scale.decision`` is published only when
        its desired count or patchID differs from the last published one, or when the last
        publish is ``decision_heartbeat`` seconds old (ADR 0061). Batches always publish:
        their decision carries the watermark a restarted worker resumes from."""
        target = self.target
        if self._recorder is not None:
            self._recorder.record_statistics(stats)
        standing = self._standing_request() if may_skip else None
        reason = self._apply_schedule(reason)
        ers = target.ephemeral_runner_set_name
        cap = None if self._capacity is None else self._capacity.runner_cap(ers)
        decision = self.scaler.decide(
            stats.total_assigned_jobs, unchanged_since=standing, capacity=cap
        )
        if decision.skipped:
            self.unchanged_batches += 1
            reason = f"{reason}; count unchanged, no job completed: ERS not patched"
            await self._patch_share()
        else:
            await self._patch_ers(decision)
        if self._recorder is not None:
            self._recorder.record_desired(decision.target)
            if self._capacity is not None:
                self._record_capacity(self._recorder, self._capacity)
        self.decisions.append(decision)
        del self.decisions[:-100]
        headers = {SCALE_SET_ID_HEADER: str(target.scale_set_id)}
        last = mark or self.watermark
        if last is not None:
            headers[MESSAGE_ID_HEADER] = str(last.message_id)
            if last.session_id:
                headers[SESSION_ID_HEADER] = last.session_id
            if last.stream_seq:
                headers[JOBS_SEQ_HEADER] = str(last.stream_seq)
        event = ScaleDecision(
            source=SOURCE,
            keys=target.event_keys,
            scale_set_id=target.scale_set_id,
            ephemeral_runner_set=target.ephemeral_runner_set_name,
            desired_replicas=decision.target,
            patch_id=decision.patch_id,
            assigned_jobs=decision.assigned_jobs,
            min_runners=self.scaler.min_runners,
            max_runners=self.scaler.max_runners,
            reason=reason,
        )
        now = self._clock()
        if not always_publish and not self._publish_due(decision, now):
            self.decisions_unpublished += 1
            await self._patch_runners(runners)
            log.debug(
                "%s: desired %d runners unchanged (patchID %d, %s); decision not published",
                target.label,
                decision.target,
                decision.patch_id,
                reason,
            )
            return decision
        await asyncio.gather(
            self._patch_runners(runners),
            publish_event(self._js, target.scale_subject, event, headers=headers, timeout=10.0),
        )
        self._published = self._published_key(decision)
        self._published_at = now
        log.info(
            "%s: desired %d runners (patchID %d, %d assigned jobs, %s)",
            target.label,
            decision.target,
            decision.patch_id,
            decision.assigned_jobs,
            reason,
        )
        return decision

    def _publish_due(self, decision: Decision, now: float) -> bool:
        """ADR 0061: a decision that changes what the last published one said (count, patchID,
        or the minimum a scheduled override sets), or the heartbeat; a worker's first
        decision is always due."""
        if self._published != self._published_key(decision):
            return True
        return now - self._published_at >= self._heartbeat

    def _published_key(self, decision: Decision) -> tuple[int, int, int]:
        return decision.target, decision.patch_id, self.scaler.min_runners

    def _apply_schedule(self, reason: str) -> str:
        """Set the scaler's minimum from the scheduled overrides open now (every decision, so
        a window opens or closes on the next statistics tick, with no restart)."""
        overrides = self.target.scheduled_overrides
        if not overrides:
            return reason
        now = self._wall_clock()
        effective = effective_minimum(self._base_min, self.scaler.max_runners, overrides, now)
        if effective.min_runners != self.scaler.min_runners:
            log.info(
                "%s: minimum %d -> %d (%s)",
                self.target.label,
                self.scaler.min_runners,
                effective.min_runners,
                effective.override or "no scheduled override open",
            )
            if self._recorder is not None:
                self._recorder.record_static(effective.min_runners, self.scaler.max_runners)
        self.scaler.set_minimum(effective.min_runners)
        if effective.override:
            return f"{reason}; minimum {effective.min_runners} from {effective.override}"
        return reason

    def _standing_request(self) -> tuple[int, int] | None:
        """The (replicas, patchID) this worker wrote within the window, else ``None``."""
        if self._written is None:
            return None
        replicas, patch_id, at = self._written
        if self._clock() - at >= self._unchanged_window:
            return None
        return replicas, patch_id

    async def _patch_ers(self, decision: Decision) -> None:
        """Merge-patch the ERS; the same body again within the window is not re-sent (it
        would change nothing: same patchID, same replicas; the comparison leaves the stamp
        out). The patch carries its send time for its patchID (ADR 0065: where the stage
        chain passes from the listener to the reconciler)."""
        share = self._share_annotation()
        patch = ers_patch(decision, share)
        now = self._clock()
        if self._last_patch is not None:
            body, at = self._last_patch
            if body == patch and now - at < self._identical_window:
                self.patches_skipped += 1
                return
        # Unknown until the write answers: a failed write may or may not have landed.
        self._last_patch = None
        self._written = None
        self._requested_at = None
        requested_at = round(self._wall_clock().timestamp(), 3)
        stamp = {ANNOTATION_SCALE_REQUESTED_AT: request_stamp(decision.patch_id, requested_at)}
        sent = ers_patch(decision, {**(share or {}), **stamp})
        try:
            await self._kube.patch_merge(
                "EphemeralRunnerSet",
                self.target.ephemeral_runner_set_name,
                sent,
                namespace=self.target.namespace,
            )
        except ForbiddenError:
            if not self._refused_while_stopping():
                raise
            return
        self._last_patch = (patch, now)
        self._written = (decision.target, decision.patch_id, now)
        self._requested_at = requested_at
        if share:
            self._reported_share = share[ANNOTATION_CAPACITY_SHARE]

    def _record_capacity(self, recorder: ScaleSetRecorder, board: CapacityBoard) -> None:
        ers = self.target.ephemeral_runner_set_name
        allocation = board.allocation
        recorder.record_capacity(
            board.share(ers),
            board.report(ers).advertised,
            {k: float(v) for k, v in allocation.total.items()},
            {k: float(v) for k, v in allocation.used.items()},
        )

    def _share_annotation(self) -> dict[str, str] | None:
        if self._capacity is None:
            return None
        report = self._capacity.report(self.target.ephemeral_runner_set_name)
        return {ANNOTATION_CAPACITY_SHARE: report.encode()}

    async def _patch_share(self) -> None:
        """A skipped decision still reports a changed share (metadata only, no patchID)."""
        share = self._share_annotation()
        if not share or share[ANNOTATION_CAPACITY_SHARE] == self._reported_share:
            return
        try:
            await self._kube.patch_merge(
                "EphemeralRunnerSet",
                self.target.ephemeral_runner_set_name,
                {"metadata": {"annotations": share}},
                namespace=self.target.namespace,
            )
        except ForbiddenError:
            if not self._refused_while_stopping():
                raise
            return
        self._reported_share = share[ANNOTATION_CAPACITY_SHARE]

    async def _patch_runners(self, jobs: Sequence[JobInfo]) -> None:
        await asyncio.gather(
            *(self._patch_runner(job.runner_name, runner_status_patch(job)) for job in jobs)
        )

    async def _patch_runner(self, runner_name: str, status: dict[str, object]) -> None:
        """JobStarted -> EphemeralRunner status; a runner that is already gone is fine."""
        if not runner_name:
            return
        try:
            await self._kube.patch_status(
                "EphemeralRunner", runner_name, status, namespace=self.target.namespace
            )
        except NotFoundError:
            log.debug("EphemeralRunner %s not found; status patch skipped", runner_name)
        except ForbiddenError:
            if not self._refused_while_stopping():
                raise

    def _refused_while_stopping(self) -> bool:
        """A 403 while this process stops: its Role or RoleBinding is being deleted with its
        AutoscalingListener, so the write is taken as done, like a NotFound (one info line,
        no retry). Any other 403 stays an error."""
        if self.stopping is None or not self.stopping.is_set():
            return False
        self.refused_while_stopping += 1
        if self.refused_while_stopping == 1:
            log.info(
                "%s: Kubernetes write refused (403) while stopping: the listener's access "
                "is being removed; further writes are skipped",
                self.target.label,
            )
        return True

    # --- restore ----------------------------------------------------------------------
    async def _restore(self) -> None:
        """Where to resume: JetStream's ack floor and the last decision (if plausible)."""
        target = self.target
        spec = target.consumer_spec()
        info = await self._js.consumer_info(spec.stream, spec.durable)
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        self.handled_seq = max(self.handled_seq, floor or 0)
        with contextlib.suppress(nats.js.errors.NotFoundError):
            last = await self._js.get_last_msg(STREAM_SCALE.name, target.scale_subject)
            mark = _decision_mark(last.headers or {})
            if mark is None or mark.scale_set_id != target.scale_set_id:
                return
            stream = await self._js.stream_info(STREAM_JOBS.name)
            end = stream.state.last_seq
            if mark.stream_seq > end:
                log.warning(
                    "%s: last decision names stream sequence %d beyond the stream's end %d; "
                    "ignored",
                    target.label,
                    mark.stream_seq,
                    end,
                )
                return
            self._remember(mark)
        if self.watermark is not None or self.handled_seq:
            log.info(
                "%s resumes after stream sequence %d",
                target.label,
                self.handled_seq,
            )


def _decision_mark(headers: Mapping[str, str]) -> Watermark | None:
    """The handled batch a ``scale.decision`` names; ``None`` without session and sequence
    (a decision from before sessions were recorded, whose message id proves nothing)."""
    try:
        scale_set_id = int(headers.get(SCALE_SET_ID_HEADER, "0"))
        message_id = int(headers.get(MESSAGE_ID_HEADER, "0"))
        stream_seq = int(headers.get(JOBS_SEQ_HEADER, "0"))
    except ValueError:
        return None
    session_id = headers.get(SESSION_ID_HEADER, "")
    if not scale_set_id or not message_id or not session_id or stream_seq < 1:
        return None
    return Watermark(scale_set_id, message_id, session_id, stream_seq)
