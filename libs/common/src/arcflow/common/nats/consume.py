"""The settle policy: explicit ack, bounded retries with backoff, dead letters, never a crash.

One policy (:class:`SettlePolicy`), used by the services' FastStream subscribers
(:mod:`arcflow.common.service.subscribers`, ADR 0070): FastStream fetches a batch and makes one
call (``AckPolicy.MANUAL``: it settles nothing); the decoder applies
:meth:`SettlePolicy.admit` and the batch handler settles each message itself with nats-py's
``Msg`` API (``ack``, ``nak(delay=)``, ``term``) as the policy decides. (The listener consumes
nothing since ADR 0104.)

Nothing here imports FastStream. Each handler call runs under a deadline (the declared one,
else :data:`DEADLINE_SHARE_OF_ACK_WAIT` of the ack wait); an overrun is cancelled, raises
:class:`HandlerDeadlineExceededError` and is retried like any failure. Rules, per message:

1. parse (:func:`~arcflow.common.events.parse_event`, with size, depth and integer limits);
   malformed, schema-invalid or of an unknown ``schema_version`` -> dead letter on the first
   delivery, with the reason (retrying cannot fix bytes);
2. an event of a type this consumer does not handle -> ack and skip;
3. call the handler inside a consumer span (child of the trace context in the headers);
   success -> ack;
4. :class:`PermanentEventError` -> dead letter at once;
5. any other exception -> ``nak`` with exponential delay, until attempt ``max_deliver``
   fails -> dead letter;
6. a delivery beyond ``max_deliver`` (the process died mid-attempt) -> dead letter.

A dead letter is a :class:`~arcflow.common.events.DeadLetter` event on ``arc.dlq.<subject>``
(redacted, truncated payload; reason; delivery count), logged without the payload; then the
original is ``term``-ed. If the dead letter cannot be published the original is nak-ed so
nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from nats.aio.msg import Msg
from opentelemetry import trace

from arcflow.common import subjects
from arcflow.common.events import (
    DEADLETTER_PAYLOAD_LIMIT,
    DeadLetter,
    EventBase,
    EventKeys,
    MalformedEventError,
    parse_event,
)
from arcflow.common.nats.jetstream import ConsumerSpec
from arcflow.common.nats.publish import MSG_ID_HEADER, PublishTarget, publish_event
from arcflow.common.telemetry.redaction import redact_text
from arcflow.common.telemetry.tracing import extract_trace_context, trace_headers_of

log = logging.getLogger(__name__)
_tracer = trace.get_tracer("arcflow.common.nats")


class PermanentEventError(Exception):
    """Raised by a handler when retrying cannot help: the message goes to the DLQ at once."""


class HandlerDeadlineExceededError(TimeoutError):
    """A handler call overran its deadline and was cancelled; the message will be retried."""


#: Share of the consumer's ack wait a handler call may use before it is abandoned (past the
#: ack wait JetStream would redeliver the message while it is still handled).
DEADLINE_SHARE_OF_ACK_WAIT = 0.8


class Outcome(StrEnum):
    """What the consumer did with one delivery."""

    ACKED = "acked"
    RETRY = "retry"
    SKIPPED = "skipped"
    DEAD_LETTERED = "dead_lettered"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class Delivery:
    """Facts about the delivery a handler is processing (for logging and idempotency)."""

    subject: str
    delivery_count: int
    stream_sequence: int | None
    msg_id: str | None
    headers: Mapping[str, str]


EventHandler = Callable[[EventBase, Delivery], Awaitable[None]]


def delivery_of(msg: Msg) -> Delivery:
    """The delivery facts of a nats-py message (JetStream metadata, headers)."""
    try:
        metadata = msg.metadata
        count, seq = int(metadata.num_delivered), int(metadata.sequence.stream)
    except Exception:  # not a JetStream message (faststream's in-memory broker)
        count, seq = 1, None
    headers = dict(msg.headers or {})
    return Delivery(
        subject=msg.subject,
        delivery_count=count,
        stream_sequence=seq,
        msg_id=headers.get(MSG_ID_HEADER),
        headers=headers,
    )


def _keys_from_subject(subject: str) -> EventKeys:
    try:
        parsed = subjects.parse_subject(subject)
    except subjects.InvalidSubjectTokenError:
        return EventKeys()
    return EventKeys(namespace=parsed.namespace, ars=parsed.ars, variant=parsed.variant)


def _merge_keys(base: EventKeys, override: EventKeys | None) -> EventKeys:
    if override is None:
        return base
    return base.model_copy(update=override.model_dump(exclude_none=True))


def build_dead_letter(
    *,
    source: str,
    consumer: str | None,
    subject: str,
    payload: bytes,
    reason: str,
    delivery_count: int,
    original_msg_id: str | None = None,
    keys: EventKeys | None = None,
) -> DeadLetter:
    """The dead-letter event for a message (pure): redacted reason and payload, 8 KiB max."""
    text = payload[:DEADLETTER_PAYLOAD_LIMIT].decode("utf-8", errors="replace")
    return DeadLetter(
        source=source,
        keys=_merge_keys(_keys_from_subject(subject), keys),
        original_subject=subject,
        reason=redact_text(reason),
        delivery_count=delivery_count,
        consumer=consumer,
        original_msg_id=original_msg_id,
        payload=redact_text(text),
        payload_size=len(payload),
        payload_truncated=len(payload) > DEADLETTER_PAYLOAD_LIMIT,
    )


class SettlePolicy:
    """What to do with one delivery of ``spec``'s consumer (the rules of the module docstring),
    without settling it: the caller acks, naks or terms as told.

    ``event_types`` limits which event classes reach the handler (others are acked and
    skipped). ``dead_letter_target`` is where dead letters are published.
    """

    def __init__(
        self,
        spec: ConsumerSpec,
        *,
        service: str,
        event_types: tuple[type[EventBase], ...] | None = None,
        dead_letter_target: PublishTarget | None = None,
    ) -> None:
        self.spec = spec
        self.service = service
        self.event_types = event_types
        self.dead_letter_target = dead_letter_target

    async def admit(self, msg: Msg, delivery: Delivery) -> EventBase | Outcome:
        """The event to hand to the handler, or what was decided instead: ``SKIPPED`` (ack it),
        ``DEAD_LETTERED``/``DROPPED`` (term it) or ``RETRY`` (nak it with :meth:`retry_delay`:
        the dead letter could not be published)."""
        if delivery.delivery_count > self.spec.max_deliver:
            return await self.dead_letter(
                msg,
                delivery,
                f"delivered {delivery.delivery_count} times, over max_deliver "
                f"{self.spec.max_deliver} (a previous attempt did not finish)",
            )
        try:
            event = parse_event(msg.data)
        except MalformedEventError as exc:
            return await self.dead_letter(msg, delivery, f"malformed event: {exc}")
        except Exception as exc:  # parse_event should not raise this; retrying cannot help
            return await self.dead_letter(msg, delivery, f"unparseable event: {type(exc).__name__}")
        if self.event_types is not None and not isinstance(event, self.event_types):
            return Outcome.SKIPPED
        return event

    def retry_delay(self, delivery: Delivery) -> float:
        return self.spec.retry_delay(delivery.delivery_count)

    async def failed(
        self, msg: Msg, delivery: Delivery, event: EventBase, exc: Exception
    ) -> Outcome:
        """The handler raised ``exc``: ``RETRY`` (nak with :meth:`retry_delay`) or, after a
        permanent failure or the last attempt, the dead letter's outcome."""
        if isinstance(exc, PermanentEventError):
            return await self.dead_letter(
                msg, delivery, f"permanent failure: {exc}", keys=event.keys
            )
        reason = f"{type(exc).__name__}: {exc}"
        if delivery.delivery_count >= self.spec.max_deliver:
            return await self.dead_letter(
                msg,
                delivery,
                f"handler failed attempt {delivery.delivery_count} of "
                f"{self.spec.max_deliver}; last error: {reason}",
                keys=event.keys,
            )
        log.warning(
            "handler failed; will retry",
            extra={
                "consumer": self.spec.durable,
                "subject": delivery.subject,
                "event_type": event.type,
                "event_id": event.id,
                "delivery_count": delivery.delivery_count,
                "retry_in_seconds": self.retry_delay(delivery),
                "error": redact_text(reason),
            },
        )
        return Outcome.RETRY

    def span(self, event: EventBase, delivery: Delivery) -> AbstractContextManager[Any]:
        """The consumer span of one handler call, a child of the trace in the headers (or, for
        an event published without them, of the trace context it carries)."""
        parent = extract_trace_context(delivery.headers or trace_headers_of(event.trace))
        return _tracer.start_as_current_span(
            f"consume {delivery.subject}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes={"event.type": event.type, "consumer": self.spec.durable},
        )

    async def dead_letter(
        self, msg: Msg, delivery: Delivery, reason: str, keys: EventKeys | None = None
    ) -> Outcome:
        """Publish the dead letter of ``msg``: ``DEAD_LETTERED`` (term the original),
        ``DROPPED`` (a dead letter itself failed: term it, never loop) or ``RETRY`` (the
        publish failed: nak the original so nothing is lost)."""
        if delivery.subject.startswith(f"{subjects.PREFIX}.{subjects.DOMAIN_DLQ}."):
            # A dead letter that cannot be handled is not dead-lettered again (no loops).
            log.error(
                "dead letter could not be handled; dropped",
                extra={"consumer": self.spec.durable, "subject": delivery.subject},
            )
            return Outcome.DROPPED
        dead = build_dead_letter(
            source=self.service,
            consumer=self.spec.durable,
            subject=delivery.subject,
            payload=bytes(msg.data),
            reason=reason,
            delivery_count=delivery.delivery_count,
            original_msg_id=delivery.msg_id,
            keys=keys,
        )
        if delivery.stream_sequence is not None:
            # Deterministic id: dead-lettering the same stored message twice stores one letter.
            dead = dead.model_copy(
                update={"id": f"dlq-{self.spec.stream}-{delivery.stream_sequence}"}
            )
        target = self.dead_letter_target
        try:
            if target is None:
                raise RuntimeError("no dead-letter target")
            await publish_event(target, subjects.dlq_subject(delivery.subject), dead)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error(
                "could not publish dead letter; message will be redelivered",
                extra={
                    "consumer": self.spec.durable,
                    "subject": delivery.subject,
                    "reason": dead.reason,
                    "error": redact_text(f"{type(exc).__name__}: {exc}"),
                },
            )
            return Outcome.RETRY
        log.error(
            "message dead-lettered",
            extra={
                "consumer": self.spec.durable,
                "subject": delivery.subject,
                "dlq_subject": subjects.dlq_subject(delivery.subject),
                "reason": dead.reason,
                "delivery_count": delivery.delivery_count,
                "payload_size": dead.payload_size,
            },
        )
        return Outcome.DEAD_LETTERED
