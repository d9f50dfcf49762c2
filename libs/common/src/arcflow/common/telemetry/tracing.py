"""Trace context across NATS: W3C ``traceparent``/``tracestate`` in message headers.

One trace follows a job from the GitHub message to the runner pod because every publish
injects the current context into the headers and every consume starts its span as a child
of the extracted one. The SDK provider is set up without an exporter: spans exist (so ids
propagate and appear in logs) but go nowhere until an exporter is added.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from arcflow.common.events.envelope import TraceContext

_PROPAGATOR = TraceContextTextMapPropagator()
_provider: TracerProvider | None = None


def setup_tracing(service: str, *, service_version: str = "0.1.0") -> TracerProvider:
    """Install an SDK tracer provider (no exporter) as the global one, once per process.

    OpenTelemetry allows setting the global provider only once; later calls return the
    provider installed first.
    """
    global _provider
    if _provider is None:
        provider = TracerProvider(
            resource=Resource.create({"service.name": service, "service.version": service_version})
        )
        trace.set_tracer_provider(provider)
        _provider = provider
    return _provider


def inject_trace_headers(
    headers: dict[str, str] | None = None, context: otel_context.Context | None = None
) -> dict[str, str]:
    """Add ``traceparent`` (and ``tracestate``) of the current or given context to headers.

    Returns the same dict (a new one if ``None``); adds nothing when no span is active.
    """
    carrier = {} if headers is None else headers
    _PROPAGATOR.inject(carrier, context=context)
    return carrier


def extract_trace_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    """The OTel context carried by message headers (an empty context when there is none)."""
    return _PROPAGATOR.extract(dict(headers or {}))


def current_trace_context() -> TraceContext | None:
    """The active span's W3C context as the event-envelope model, or ``None``."""
    carrier = inject_trace_headers()
    parent = carrier.get("traceparent")
    if not parent:
        return None
    return TraceContext(traceparent=parent, tracestate=carrier.get("tracestate"))


def trace_headers_of(trace_ctx: TraceContext | None) -> dict[str, str]:
    """Headers for an event's embedded trace context (used when no span is active)."""
    if trace_ctx is None:
        return {}
    headers = {"traceparent": trace_ctx.traceparent}
    if trace_ctx.tracestate:
        headers["tracestate"] = trace_ctx.tracestate
    return headers
