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
from arcflow.common.telemetry.tracing import (
    SAMPLER_ENV,
    UNRECORDED,
    sampler_from,
    tracer_provider,
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


def test_spans_are_not_recorded_but_their_ids_propagate() -> None:
    """ADR 0127: with no exporter a new trace is not recorded, yet every span has valid ids,
    its headers carry them, and a consumer's span continues the same trace (unrecorded too)."""
    tracer = tracer_provider("test", environ={}).get_tracer("test")
    with tracer.start_as_current_span("publish") as producer:
        headers = inject_trace_headers()
        envelope = current_trace_context()
    produced = producer.get_span_context()
    assert produced.is_valid
    assert not producer.is_recording()
    _version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{produced.trace_id:032x}", f"{produced.span_id:016x}")
    assert int(flags, 16) & 0x01 == 0  # W3C "sampled" flag off: downstream does not record
    assert envelope is not None
    assert envelope.traceparent == headers["traceparent"]
    token = otel_context.attach(extract_trace_context(headers))
    try:
        with tracer.start_as_current_span("consume") as consumer:
            assert consumer.get_span_context().trace_id == produced.trace_id
            assert consumer.get_span_context().span_id != produced.span_id
            assert not consumer.is_recording()
    finally:
        otel_context.detach(token)


def test_a_recorded_parent_is_continued_and_the_environment_wins() -> None:
    unrecorded = tracer_provider("test", environ={}).get_tracer("test")
    recorded_parent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    token = otel_context.attach(extract_trace_context({"traceparent": recorded_parent}))
    try:
        with unrecorded.start_as_current_span("consume") as child:
            assert child.is_recording()  # a trace recorded upstream stays recorded
    finally:
        otel_context.detach(token)
    assert sampler_from({}) is UNRECORDED
    assert sampler_from({SAMPLER_ENV: "always_on"}) is None  # the SDK reads the variable
    recording = tracer_provider("test", environ={SAMPLER_ENV: "always_on"})
    assert recording.sampler is not UNRECORDED
