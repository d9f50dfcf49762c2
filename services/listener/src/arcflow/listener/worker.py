"""The worker of one scale set: JetStream job batches -> scaler -> ERS patch -> decision event.

Idempotence. A GitHub message can reach the stream twice (the pump died between the PubAck
and GitHub's ack, and the re-publish fell outside JetStream's duplicate window), and JetStream
redelivers whatever was not acked. GitHub message ids grow per queue, so the worker keeps a
*watermark*: the highest message id whose batch it fully handled, per scale set id. A batch at
or below it is not scaled again (its JobStarted runner patches, idempotent merge patches, are
re-applied so a batch that failed half-way loses nothing). The watermark survives restarts:
it is restored from the last ``scale.decision`` on ``arc.scale.<ns>.<ars>.<variant>`` (its
``Arcflow-Github-Message-Id`` header; the decision is published after the ERS patch and
before the ack) and from the message at the durable consumer's ack floor, whichever is
higher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from opentelemetry import trace

from arcflow.common.events import (
    EventBase,
    EventKeys,
    JobsBatch,
    JobStatistics,
    MalformedEventError,
    ScaleDecision,
    parse_event,
)
from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.common.nats import (
    STREAM_SCALE,
    Delivery,
    EventConsumer,
    ensure_consumer,
    publish_event,
)
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.metrics import ScaleSetRecorder
from arcflow.listener.pump import SOURCE, StatisticsTick
from arcflow.listener.scaler import Decision, DesiredRunnerScaler, ers_patch, runner_status_patch

log = logging.getLogger("arcflow.listener.worker")
_tracer = trace.get_tracer("arcflow.listener")

MESSAGE_ID_HEADER = "Arcflow-Github-Message-Id"
SCALE_SET_ID_HEADER = "Arcflow-Scale-Set-Id"


T = TypeVar("T")


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
    scale_set_id: int
    message_id: int

    def covers(self, scale_set_id: int, message_id: int) -> bool:
        return scale_set_id == self.scale_set_id and message_id <= self.message_id


class ScaleSetWorker:
    """Consumes one scale set's batches and ticks; owns its scaler's I/O."""

    def __init__(
        self,
        target: ScaleSetTarget,
        js: JetStreamContext,
        kube: KubeClient,
        scaler: DesiredRunnerScaler,
        recorder: ScaleSetRecorder | None = None,
        *,
        fetch_timeout: float = 5.0,
        batch_size: int = 16,
    ) -> None:
        self.target = target
        self._js = js
        self._kube = kube
        self.scaler = scaler
        self._recorder = recorder
        self._fetch_timeout = fetch_timeout
        self._batch_size = batch_size
        self._lock = asyncio.Lock()
        self._tick: StatisticsTick | None = None
        self._tick_event = asyncio.Event()
        self.watermark: Watermark | None = None
        self.decisions: list[Decision] = []
        self.skipped_batches = 0

    # --- inputs -----------------------------------------------------------------------
    def post_tick(self, tick: StatisticsTick) -> None:
        """Latest statistics from the pump; only the newest pending one is applied."""
        self._tick = tick
        self._tick_event.set()

    # --- run --------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        spec = self.target.consumer_spec()
        await _retry_timeouts(lambda: ensure_consumer(self._js, spec))
        self.watermark = await _retry_timeouts(self._restore_watermark)
        consumer = EventConsumer(
            spec,
            self._handle_event,
            service=SOURCE,
            event_types=(JobsBatch,),
            dead_letter_target=self._js,
        )
        subscription = await _retry_timeouts(
            lambda: self._js.pull_subscribe_bind(durable=spec.durable, stream=spec.stream)
        )
        ticks = asyncio.ensure_future(self._tick_loop())
        stopper = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                fetch = asyncio.ensure_future(
                    subscription.fetch(self._batch_size, timeout=self._fetch_timeout)
                )
                await asyncio.wait({fetch, stopper, ticks}, return_when=asyncio.FIRST_COMPLETED)
                if ticks.done():
                    fetch.cancel()
                    ticks.result()  # a failed tick ends the worker (supervised)
                if not fetch.done():
                    fetch.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await fetch
                    break
                try:
                    messages = fetch.result()
                except TimeoutError:  # nats.errors.TimeoutError, or asyncio's from inside fetch
                    continue
                for msg in messages:
                    await consumer.process(msg)
        finally:
            stopper.cancel()
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

    # --- handlers ---------------------------------------------------------------------
    async def apply_tick(self, tick: StatisticsTick) -> Decision | None:
        """``HandleDesiredRunnerCount`` for statistics seen without a message."""
        async with self._lock:
            mark = self.watermark
            if (
                mark is not None
                and mark.scale_set_id == self.target.scale_set_id
                and tick.last_message_id < mark.message_id
            ):
                return None  # a newer batch already decided with newer statistics
            with _tracer.start_as_current_span(
                "scale.decision",
                attributes={"scale_set.id": self.target.scale_set_id, "reason": tick.reason},
            ):
                return await self._decide(tick.statistics, reason=tick.reason)

    async def _handle_event(self, event: EventBase, delivery: Delivery) -> None:
        if isinstance(event, JobsBatch):
            await self.handle_batch(event)

    async def handle_batch(self, batch: JobsBatch) -> Decision | None:
        """One GitHub message: runner status patches, scaler, ERS patch, decision event."""
        target = self.target
        async with self._lock:
            started = [j for j in batch.jobs if j.message_type == "JobStarted"]
            completed = [j for j in batch.jobs if j.message_type == "JobCompleted"]
            if batch.scale_set_id != target.scale_set_id:
                log.warning(
                    "batch of scale set %d on the subject of %s skipped",
                    batch.scale_set_id,
                    target.label,
                )
                self.skipped_batches += 1
                return None
            mark = self.watermark
            if mark is not None and mark.covers(batch.scale_set_id, batch.message_id):
                log.info(
                    "message %d of %s already handled (watermark %d); not scaling again",
                    batch.message_id,
                    target.label,
                    mark.message_id,
                )
                for job in started:
                    await self._patch_runner(job.runner_name, runner_status_patch(job))
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
                    for job in started:
                        self.scaler.job_started()
                        await self._patch_runner(job.runner_name, runner_status_patch(job))
                    for _job in completed:
                        self.scaler.job_completed()
                    decision = await self._decide(
                        batch.statistics,
                        reason=f"message {batch.message_id}",
                        message_id=batch.message_id,
                    )
                except BaseException:
                    # A retried batch must see the scaler as it was before this attempt.
                    self.scaler.target, self.scaler.patch_seq, self.scaler.dirty = state
                    raise
            if self._recorder is not None:
                for job in started:
                    self._recorder.record_job_started(job)
                for job in completed:
                    self._recorder.record_job_completed(job)
            self.watermark = Watermark(batch.scale_set_id, batch.message_id)
            return decision

    async def _decide(
        self, stats: JobStatistics, *, reason: str, message_id: int | None = None
    ) -> Decision:
        target = self.target
        if self._recorder is not None:
            self._recorder.record_statistics(stats)
        decision = self.scaler.decide(stats.total_assigned_jobs)
        await self._kube.patch_merge(
            "EphemeralRunnerSet",
            target.ephemeral_runner_set_name,
            ers_patch(decision),
            namespace=target.namespace,
        )
        if self._recorder is not None:
            self._recorder.record_desired(decision.target)
        self.decisions.append(decision)
        del self.decisions[:-100]
        mark_id = message_id
        if mark_id is None and self.watermark is not None:
            mark_id = self.watermark.message_id
        headers = {SCALE_SET_ID_HEADER: str(target.scale_set_id)}
        if mark_id is not None:
            headers[MESSAGE_ID_HEADER] = str(mark_id)
        await publish_event(
            self._js,
            target.scale_subject,
            ScaleDecision(
                source=SOURCE,
                keys=EventKeys(
                    namespace=target.namespace,
                    ars=target.ars,
                    variant=target.variant,
                    scale_set_id=target.scale_set_id,
                ),
                scale_set_id=target.scale_set_id,
                ephemeral_runner_set=target.ephemeral_runner_set_name,
                desired_replicas=decision.target,
                patch_id=decision.patch_id,
                assigned_jobs=decision.assigned_jobs,
                min_runners=self.scaler.min_runners,
                max_runners=self.scaler.max_runners,
                reason=reason,
            ),
            headers=headers,
            timeout=10.0,
        )
        log.info(
            "%s: desired %d runners (patchID %d, %d assigned jobs, %s)",
            target.label,
            decision.target,
            decision.patch_id,
            decision.assigned_jobs,
            reason,
        )
        return decision

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

    # --- watermark --------------------------------------------------------------------
    async def _restore_watermark(self) -> Watermark | None:
        """The highest handled message id, from the decision stream and the ack floor."""
        candidates: list[Watermark] = []
        target = self.target
        with contextlib.suppress(nats.js.errors.NotFoundError):
            last = await self._js.get_last_msg(STREAM_SCALE.name, target.scale_subject)
            headers = last.headers or {}
            try:
                scale_set_id = int(headers.get(SCALE_SET_ID_HEADER, "0"))
                message_id = int(headers.get(MESSAGE_ID_HEADER, "0"))
            except ValueError:
                scale_set_id = message_id = 0
            if scale_set_id and message_id:
                candidates.append(Watermark(scale_set_id, message_id))
        spec = target.consumer_spec()
        info = await self._js.consumer_info(spec.stream, spec.durable)
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        if floor:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                raw = await self._js.get_msg(spec.stream, seq=floor)
                try:
                    event = parse_event(raw.data or b"")
                except MalformedEventError:
                    event = None
                if isinstance(event, JobsBatch):
                    candidates.append(Watermark(event.scale_set_id, event.message_id))
        own = [c for c in candidates if c.scale_set_id == target.scale_set_id]
        mark = max(own, key=lambda c: c.message_id) if own else None
        if mark is not None:
            log.info("%s resumes after message %d", target.label, mark.message_id)
        return mark
