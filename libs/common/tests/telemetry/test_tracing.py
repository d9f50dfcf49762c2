"""W3C trace context travels through headers and the event envelope."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace

from arcflow.common.telemetry import (
    current_trace_context,
    extract_trace_context,
    inject_trace_headers,
    setup_tracing,
)


def test_inject_then_extract_continues_the_same_trace() -> None:
    provider = setup_tracing("test")
    assert setup_tracing("other") is provider  # once per process
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("producer") as span:
        headers = inject_trace_headers({"x": "1"})
        envelope = current_trace_context()
        trace_id = span.get_span_context().trace_id
    assert headers["x"] == "1"
    assert headers["traceparent"].split("-")[1] == format(trace_id, "032x")
    assert envelope is not None
    assert envelope.traceparent == headers["traceparent"]

    ctx = extract_trace_context(headers)
    token = otel_context.attach(ctx)
    try:
        with tracer.start_as_current_span("consumer") as child:
            assert child.get_span_context().trace_id == trace_id
    finally:
        otel_context.detach(token)


def test_no_active_span_injects_nothing() -> None:
    assert inject_trace_headers() == {}
    assert current_trace_context() is None
    assert trace.get_current_span(extract_trace_context(None)).get_span_context().is_valid is False
