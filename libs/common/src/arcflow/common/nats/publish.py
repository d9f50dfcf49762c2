"""Publishing an event to JetStream: one function, de-duplicated, traced, acknowledged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

from nats.js import JetStreamContext, api
from opentelemetry import trace

from arcflow.common.events import EventBase, encode_event, msg_id
from arcflow.common.nats.jetstream import stream_for_subject
from arcflow.common.telemetry.tracing import current_trace_context, trace_headers_of

MSG_ID_HEADER: Final = "Nats-Msg-Id"
EVENT_TYPE_HEADER: Final = "Arcflow-Event-Type"

_tracer = trace.get_tracer("arcflow.common.nats")

if TYPE_CHECKING:
    from faststream.nats import NatsBroker

    PublishTarget: TypeAlias = JetStreamContext | NatsBroker
else:
    PublishTarget = JetStreamContext  # or a faststream NatsBroker (not imported here: heavy)


async def publish_event(
    target: PublishTarget,
    subject: str,
    event: EventBase,
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - the PubAck wait, passed on to the client
    headers: dict[str, str] | None = None,
) -> api.PubAck | None:
    """Publish ``event`` on ``subject`` through JetStream and wait for the server's PubAck.

    Sets ``Nats-Msg-Id`` from :func:`~arcflow.common.events.msg_id` (so a re-published fact
    is stored once), the event type, and the W3C trace headers of a producer span (which is
    also written into ``event.trace``). ``target`` is a nats-py ``JetStreamContext`` or a
    connected faststream ``NatsBroker``. Returns the PubAck (``duplicate=True`` when the
    server dropped it as a duplicate); ``None`` only under faststream's in-memory test broker.
    Raises on a PubAck timeout (``timeout`` seconds) or when no stream stores ``subject``.
    """
    stream = stream_for_subject(subject).name
    # Without an SDK tracer provider the producer span is invalid; keep the caller's context.
    outer_ctx = current_trace_context()
    with _tracer.start_as_current_span(
        f"publish {subject}", kind=trace.SpanKind.PRODUCER, attributes={"event.type": event.type}
    ):
        trace_ctx = current_trace_context() or outer_ctx or event.trace
        if trace_ctx is not None and trace_ctx != event.trace:
            event = event.model_copy(update={"trace": trace_ctx})
        all_headers = dict(headers or {})
        all_headers.update(trace_headers_of(trace_ctx))
        all_headers[MSG_ID_HEADER] = msg_id(event)
        all_headers[EVENT_TYPE_HEADER] = event.type
        payload = encode_event(event)
        if isinstance(target, JetStreamContext):
            return await target.publish(
                subject, payload, timeout=timeout, stream=stream, headers=all_headers
            )
        ack: api.PubAck | None = await target.publish(
            payload, subject, headers=all_headers, stream=stream, timeout=timeout
        )
        return ack
