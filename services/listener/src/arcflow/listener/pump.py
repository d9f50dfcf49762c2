"""The session pump of one scale set: the one path from a GitHub message to an ERS patch.

Per GitHub message the pump (1) publishes a ``jobs.batch`` event on
``arc.jobs.<ns>.<ars>.<variant>`` and waits for the PubAck, (2) has its scale set's
:class:`~arcflow.listener.decision.ScaleDecider` decide on the batch (ERS patch, runner
status patches, ``scale.decision``) under a deadline, (3) only then deletes the message on
GitHub, (4) acquires the ``JobAvailable`` request ids (GHES flow). A crash or an error before
(3) makes GitHub redeliver the message (the session ends and its supervisor opens a new one);
JetStream drops the re-publish inside its duplicate window (``Nats-Msg-Id`` =
``jobs.batch:<scale set id>:<message id>``) and answers with the sequence it stored the first
copy at, which the decision compares with the last batch it decided: nothing is lost and
nothing is scaled twice (ADR 0104).

Statistics without a message take the same path, in the same task: the session's statistics
are decided before the first long poll, as upstream's listener does
(docs/upstream-behaviour.md#listener-session), those of every empty long poll after it, and,
with a shared capacity, a changed share while a long poll waits. They are level-triggered
refreshes that need no durability, so they are not published on the jobs stream.

Nothing outside the process can inject a fault here (ADR 0082): :data:`after_publish_hook` is
``None`` in the product, and only a test's own entrypoint sets it (a crash between the PubAck
and GitHub's ack, ``services/listener/tests/listener_integration/crashing_listener.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from nats.js import JetStreamContext
from opentelemetry import trace

from arcflow.common.actions import (
    ActionsClient,
    ConflictRetry,
    InvalidResponseError,
    JobAvailable,
    JobMessage,
    MessageSessionClient,
    NilSessionError,
    RunnerScaleSetMessage,
    RunnerScaleSetStatistic,
    ScaleSetNotFoundError,
    SessionConflictError,
)
from arcflow.common.events import (
    JobInfo,
    JobsBatch,
    JobStatistics,
    SessionFailed,
    SessionOpened,
)
from arcflow.common.nats import publish_event
from arcflow.common.subjects import errors_subject
from arcflow.common.telemetry.redaction import redact_text
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import ImplausibleBatchError, ScaleDecider
from arcflow.listener.decision_event import SOURCE
from arcflow.listener.sessions import SessionRecord, SessionStore

if TYPE_CHECKING:  # only sets with a shared capacity import it (ADR 0074)
    from arcflow.listener.capacity import CapacityBoard

log = logging.getLogger("arcflow.listener.pump")
_tracer = trace.get_tracer("arcflow.listener")

T = TypeVar("T")

#: Seconds one decision may take (ERS patch, runner patches, decision event) before it is
#: abandoned and the session ends, so GitHub redelivers an unacknowledged message (ADR 0081).
DECISION_DEADLINE = 24.0

AfterPublish = Callable[[JobsBatch], Awaitable[None]]

#: Called by every pump after each PubAck and before GitHub's ack, with the batch and how many
#: batches that pump has published. ``None`` in the product: no environment variable,
#: ``config.json`` or chart value sets it, only Python code in the process (a test's own
#: entrypoint, ADR 0082).
AfterPublishHook = Callable[[JobsBatch, int], Awaitable[None]]
after_publish_hook: AfterPublishHook | None = None


def job_statistics(stats: RunnerScaleSetStatistic) -> JobStatistics:
    return JobStatistics(
        total_available_jobs=stats.total_available_jobs,
        total_acquired_jobs=stats.total_acquired_jobs,
        total_assigned_jobs=stats.total_assigned_jobs,
        total_running_jobs=stats.total_running_jobs,
        total_registered_runners=stats.total_registered_runners,
        total_busy_runners=stats.total_busy_runners,
        total_idle_runners=stats.total_idle_runners,
    )


def _time(value: datetime) -> datetime | None:
    """Go's zero time (year 1) means "not set"."""
    return None if value.year <= 1 else value


def job_info(message: JobMessage) -> JobInfo:
    """A job message without anything but ids, names and times (no URL, no token)."""
    return JobInfo(
        message_type=message.message_type,
        runner_request_id=message.runner_request_id,
        job_id=message.job_id,
        repository_name=message.repository_name,
        owner_name=message.owner_name,
        job_workflow_ref=message.job_workflow_ref,
        job_display_name=message.job_display_name,
        workflow_run_id=message.workflow_run_id,
        event_name=message.event_name,
        request_labels=list(message.request_labels),
        runner_id=getattr(message, "runner_id", 0),
        runner_name=getattr(message, "runner_name", ""),
        result=getattr(message, "result", ""),
        queue_time=_time(message.queue_time),
        scale_set_assign_time=_time(message.scale_set_assign_time),
        runner_assign_time=_time(message.runner_assign_time),
        finish_time=_time(message.finish_time),
    )


def jobs_batch(
    target: ScaleSetTarget, message: RunnerScaleSetMessage, session_id: str = ""
) -> JobsBatch:
    """The event for one GitHub message (pure). Requires the message's statistics."""
    if message.statistics is None:
        raise InvalidResponseError(f"message {message.message_id} has no statistics")
    return JobsBatch(
        source=SOURCE,
        keys=target.event_keys,
        scale_set_id=target.scale_set_id,
        message_id=message.message_id,
        statistics=job_statistics(message.statistics),
        jobs=[job_info(m) for m in message.job_messages],
        session_id=session_id,
    )


#: ``reason`` values of a failed session create (the metric's label; bounded).
SESSION_FAILURE_NIL_ID = "nil_session_id"
SESSION_FAILURE_CONFLICT = "conflict"
SESSION_FAILURE_ERROR = "error"
#: 404 on the create: GitHub no longer has the scale set (the registrar checks and registers it
#: again, ADR 0064 amendment "Scale sets GitHub lost while idle").
SESSION_FAILURE_NOT_FOUND = "not_found"


def session_failure_reason(exc: BaseException) -> str:
    if isinstance(exc, NilSessionError):
        return SESSION_FAILURE_NIL_ID
    if isinstance(exc, SessionConflictError):
        return SESSION_FAILURE_CONFLICT
    if isinstance(exc, ScaleSetNotFoundError):
        return SESSION_FAILURE_NOT_FOUND
    return SESSION_FAILURE_ERROR


#: Longest ``message`` of a ``session.failed`` event (the exception's type and short text).
SESSION_FAILURE_MESSAGE_CHARS = 300
#: The PubAck wait of a session state event: a slow NATS only delays the retry this long.
SESSION_STATE_PUBLISH_SECONDS = 3.0


def session_failed_event(target: ScaleSetTarget, exc: BaseException) -> SessionFailed:
    """The ``session.failed`` event for a failed create (pure; redacted, bounded text)."""
    text = redact_text(f"{type(exc).__name__}: {exc}")[:SESSION_FAILURE_MESSAGE_CHARS]
    return SessionFailed(
        source=SOURCE,
        keys=target.event_keys,
        variant=target.variant,
        scale_set_id=target.scale_set_id,
        reason=session_failure_reason(exc),
        message=text,
    )


class _StoppedError(Exception):
    pass


class DecisionDeadlineError(TimeoutError):
    """A decision overran :data:`DECISION_DEADLINE`; the session ends and is reopened."""


class SessionPump:
    """Runs one message session until ``stop`` is set or an error ends it."""

    def __init__(
        self,
        target: ScaleSetTarget,
        client: ActionsClient,
        js: JetStreamContext,
        decider: ScaleDecider,
        *,
        after_publish: AfterPublish | None = None,
        retry_conflict: ConflictRetry | None = None,
        publish_timeout: float = 10.0,
        sessions: SessionStore | None = None,
        host: str = "",
        lease_held: bool = False,
        capacity: CapacityBoard | None = None,
        on_session_failure: Callable[[str], None] | None = None,
        deadline: float = DECISION_DEADLINE,
    ) -> None:
        self.target = target
        self.decider = decider
        self._deadline = deadline
        self._on_session_failure = on_session_failure
        #: Failed session creates by reason (``session_failure_reason``).
        self.session_failures: dict[str, int] = {}
        #: Batches not decided on for a reason of their own (logged; GitHub's ack follows).
        self.implausible_batches = 0
        self._sessions = sessions if sessions is not None else SessionStore(None)
        self._host = host
        #: Standby mode (ADR 0025): this process holds the scale set's lease, so a recorded
        #: session of any host is a dead or fenced holder's and is deleted before the create.
        self._lease_held = lease_held
        self.predecessors_deleted = 0
        self._client = client
        self._js = js
        self._after_publish = after_publish
        self._retry_conflict = retry_conflict
        self._publish_timeout = publish_timeout
        self.batches_published = 0
        self._progress = 0
        self.session_id: str | None = None
        #: What this pump last told the reconciler about its session (``arc.errors``, ADR
        #: 0064): ``None`` nothing yet, else "failing". One event per streak, not per retry.
        self._failing: bool | None = None
        #: The set's shared capacity (ADR 0062); None: the header is the scale set's maxRunners.
        self._capacity = capacity
        self.last_capacity: int | None = None
        #: Long polls abandoned because the capacity grant changed.
        self.capacity_repolls = 0
        #: Set when the variant's share of the capacity changed: decided while a poll waits.
        self._reshared = asyncio.Event()
        if capacity is not None:
            capacity.subscribe(target.ephemeral_runner_set_name, self._reshared.set)

    def progress(self) -> int:
        """Sessions opened plus polls answered: the supervisor's sign of a healthy run."""
        return self._progress

    async def run(self, stop: asyncio.Event) -> None:
        """Resume after the last decided batch, then one session until ``stop`` or an error."""
        try:
            await self.decider.restore()
            await self._run(stop)
        finally:
            self.decider.session_closed()

    async def _run(self, stop: asyncio.Event) -> None:
        target = self.target
        session_client = self._client.message_session(
            target.scale_set_id, target.owner, retry_conflict=self._retry_conflict
        )
        await self._delete_predecessor()
        try:
            await session_client.open()
        except Exception as exc:
            self._session_failed(exc)
            await self._say_session_state(exc)
            raise
        async with session_client as session:
            # The record first: the reconciler reads it when session.opened arrives.
            await self._remember(session.session.session_id)
            await self._say_session_state(None)
            await self._pump(session, stop)
        log.info("message session closed for %s", target.label)
        if self.session_id:
            await self._kv_step(
                "forget", self._sessions.forget(target.scale_set_id, self.session_id)
            )

    def _session_failed(self, exc: Exception) -> None:
        """A session create that failed: counted by reason; the supervisor (several sets) or
        the process exit (one set, as upstream) retries it. A nil session id gets its own
        line: the service answered 200, so nothing else would say what was wrong."""
        reason = session_failure_reason(exc)
        self.session_failures[reason] = self.session_failures.get(reason, 0) + 1
        if self._on_session_failure is not None:
            self._on_session_failure(reason)
        if reason == SESSION_FAILURE_NIL_ID:
            log.error(
                "%s: the service created a message session with the nil session id; refused, "
                "creating a new one after the backoff",
                self.target.label,
                extra={"scale_set_id": self.target.scale_set_id, "reason": reason},
            )

    async def _say_session_state(self, exc: Exception | None) -> None:
        """``session.failed`` on the first failed create of a streak, ``session.opened`` on the
        first open of the pump and the first after a failure; best effort (logged)."""
        failing = exc is not None
        if self._failing is failing:
            return
        target = self.target
        event: SessionFailed | SessionOpened = (
            session_failed_event(target, exc)
            if exc is not None
            else SessionOpened(
                source=SOURCE,
                keys=target.event_keys,
                variant=target.variant,
                scale_set_id=target.scale_set_id,
            )
        )
        try:
            await publish_event(
                self._js,
                errors_subject(target.namespace, target.ars),
                event,
                timeout=SESSION_STATE_PUBLISH_SECONDS,
            )
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s: %s not published: %s", target.label, event.type, type(err).__name__)
            return
        self._failing = failing

    async def _kv_step(self, what: str, step: Awaitable[Any]) -> Any:
        """The session record is a shortcut, never a reason to stop: failures are logged."""
        try:
            return await step
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "session record of %s: %s failed: %s", self.target.label, what, type(exc).__name__
            )
            return None

    async def _delete_predecessor(self) -> None:
        """Delete the session a previous process on this host left (it cannot be alive)."""
        target = self.target
        previous = await self._kv_step("read", self._sessions.get(target.scale_set_id))
        if previous is None:
            return
        if previous.host != self._host and not self._lease_held:
            log.info(
                "%s: session left by host %s kept (that listener may be alive)",
                target.label,
                previous.host,
            )
            return
        try:
            await self._client.delete_message_session(target.scale_set_id, previous.session_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # 404: GitHub already expired it
            log.info("%s: predecessor's session not deleted (%s)", target.label, type(exc).__name__)
        else:
            self.predecessors_deleted += 1
            log.info("%s: deleted the session a previous listener process left", target.label)
        await self._kv_step(
            "forget", self._sessions.forget(target.scale_set_id, previous.session_id)
        )

    async def _remember(self, session_id: str) -> None:
        record = SessionRecord(session_id, self.target.owner, self._host)
        await self._kv_step("write", self._sessions.remember(self.target.scale_set_id, record))

    async def _pump(self, session: MessageSessionClient, stop: asyncio.Event) -> None:
        target = self.target
        opened = session.session
        self.session_id = opened.session_id
        if opened.statistics is None:
            raise InvalidResponseError(
                f"message session of scale set {target.scale_set_id} has no statistics"
            )
        log.info(
            "message session open for %s",
            target.label,
            extra={"scale_set_id": target.scale_set_id, "owner": target.owner},
        )
        latest = job_statistics(opened.statistics)
        self._progress += 1
        last_message_id = 0
        self._observe(latest)
        await self._decide_statistics(latest, "session", stop)
        while not stop.is_set():
            try:
                message = await self._poll(session, last_message_id, latest, stop)
            except _StoppedError:
                break
            self._progress += 1
            if message is None:
                await self._decide_statistics(latest, "idle", stop)
                continue
            batch = jobs_batch(target, message, opened.session_id)
            self._observe(batch.statistics)
            await self._hand_over(session, message, batch)
            last_message_id = message.message_id
            latest = batch.statistics

    async def _within_deadline(self, what: str, call: Awaitable[T]) -> T:
        """``call`` under the decision deadline; an overrun is abandoned and named."""
        limit = asyncio.timeout(self._deadline)
        try:
            async with limit:
                return await call
        except TimeoutError:
            if not limit.expired():
                raise
            raise DecisionDeadlineError(
                f"{self.target.label}: {what} not decided within {self._deadline:g} s"
            ) from None

    async def _decide_statistics(
        self, stats: JobStatistics, reason: str, stop: asyncio.Event
    ) -> None:
        """Statistics seen without a message, decided before the next long poll; an error
        ends the session like a failed poll. A stop cancels it."""
        handled = asyncio.ensure_future(
            self._within_deadline(f"{reason} statistics", self.decider.statistics(stats, reason))
        )
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({handled, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if not handled.done():
            handled.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await handled
            return
        handled.result()

    def _observe(self, stats: JobStatistics) -> None:
        if self._capacity is not None:
            self._capacity.observe(self.target.ephemeral_runner_set_name, stats)

    async def _poll(
        self,
        session: MessageSessionClient,
        last_message_id: int,
        latest: JobStatistics,
        stop: asyncio.Event,
    ) -> RunnerScaleSetMessage | None:
        """One long poll that gives up at once (cleanly) when ``stop`` is set.

        With a shared capacity (ADR 0062) the ``X-ScaleSetMaxCapacity`` is the board's grant,
        and a poll whose grant changed meanwhile is abandoned and sent again with the new one.
        """
        board = self._capacity
        ers = self.target.ephemeral_runner_set_name
        while True:
            if board is None:
                poll_id, capacity = 0, self.target.max_runners
            else:
                poll_id, capacity = board.grant(ers)
            self.last_capacity = capacity
            poll = asyncio.ensure_future(session.get_message(last_message_id, capacity))
            try:
                answered = await self._wait_poll(poll, latest, stop)
            finally:
                if not poll.done():
                    poll.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await poll
            if answered:
                result = poll.result()
                if board is not None:
                    board.answered(ers, poll_id)
                return result
            if stop.is_set():
                raise _StoppedError
            self.capacity_repolls += 1

    async def _wait_poll(
        self, poll: asyncio.Future[Any], latest: JobStatistics, stop: asyncio.Event
    ) -> bool:
        """``True`` once the poll answered, ``False`` when it is to be abandoned (a stop, a
        new grant). A changed share is decided from ``latest`` while the poll waits."""
        board = self._capacity
        ers = self.target.ephemeral_runner_set_name
        while True:
            waiters = {asyncio.ensure_future(stop.wait())}
            if board is not None:
                waiters.add(asyncio.ensure_future(board.changed(ers).wait()))
                waiters.add(asyncio.ensure_future(self._reshared.wait()))
            try:
                await asyncio.wait({poll, *waiters}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
            if poll.done():
                return True
            if stop.is_set() or (board is not None and board.changed(ers).is_set()):
                return False
            self._reshared.clear()
            await self._decide_statistics(latest, "share", stop)

    async def _decide_batch(self, batch: JobsBatch, stream_seq: int) -> None:
        try:
            await self._within_deadline(
                f"message {batch.message_id}", self.decider.batch(batch, stream_seq)
            )
        except ImplausibleBatchError as exc:
            self.implausible_batches += 1
            log.error(
                "%s: message %d stored at sequence %d but not scaled on: %s",
                self.target.label,
                batch.message_id,
                stream_seq,
                exc,
            )

    async def _hand_over(
        self, session: MessageSessionClient, message: RunnerScaleSetMessage, batch: JobsBatch
    ) -> None:
        """Publish, decide, ack on GitHub, acquire; shielded so a stop never splits it."""
        await asyncio.shield(self._hand_over_unshielded(session, message, batch))

    async def _hand_over_unshielded(
        self, session: MessageSessionClient, message: RunnerScaleSetMessage, batch: JobsBatch
    ) -> None:
        target = self.target
        attributes: dict[str, Any] = {
            "scale_set.id": target.scale_set_id,
            "scale_set.ers": target.ephemeral_runner_set_name,
            "github.message_id": message.message_id,
            "jobs.count": len(batch.jobs),
        }
        with _tracer.start_as_current_span("jobs.batch", attributes=attributes):
            ack = await publish_event(
                self._js, target.jobs_subject, batch, timeout=self._publish_timeout
            )
            self.batches_published += 1
            log.debug(
                "published message %d of %s (duplicate=%s)",
                message.message_id,
                target.label,
                getattr(ack, "duplicate", None),
            )
            if after_publish_hook is not None:
                await after_publish_hook(batch, self.batches_published)
            if self._after_publish is not None:
                await self._after_publish(batch)
            await self._decide_batch(batch, ack.seq if ack is not None else 0)
            await session.delete_message(message.message_id)
            available = [m for m in message.job_messages if isinstance(m, JobAvailable)]
            if available:
                ids = [m.runner_request_id for m in available]
                acquired = await session.acquire_jobs(ids)
                log.info(
                    "acquired %d of %d available jobs for %s",
                    len(acquired),
                    len(ids),
                    target.label,
                )
