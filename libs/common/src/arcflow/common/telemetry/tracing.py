"""Trace context across NATS: W3C ``traceparent``/``tracestate`` in message headers.

One trace follows a job from the GitHub message to the runner pod because every publish
injects the current context into the headers and every consume starts its span as a child
of the extracted one. The SDK provider is set up without an exporter: spans exist (so ids
propagate and appear in logs) but go nowhere, so by default none is *recorded* (ADR 0127): a
span that no exporter reads still gets its trace and span ids, which propagate as before, but
skips the SDK's span object, attributes and end processing. ``OTEL_TRACES_SAMPLER`` (the
SDK's own variable) restores recording for a process that adds an exporter.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, Sampler
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from arcflow.common.events.envelope import TraceContext

_PROPAGATOR = TraceContextTextMapPropagator()
_provider: TracerProvider | None = None

#: The SDK's environment variable that names a sampler; set, it wins over the default here.
SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
#: Without an exporter nothing reads a recorded span: new traces are not recorded, and a
#: span continues its parent's choice (a trace recorded upstream stays recorded here).
UNRECORDED = ParentBased(root=ALWAYS_OFF)


def sampler_from(environ: Mapping[str, str]) -> Sampler | None:
    """The sampler to build the provider with: ``None`` (the SDK reads ``OTEL_TRACES_SAMPLER``
    itself) when that variable is set, else :data:`UNRECORDED`."""
    return None if environ.get(SAMPLER_ENV) else UNRECORDED


def tracer_provider(
    service: str, *, service_version: str = "0.1.0", environ: Mapping[str, str] | None = None
) -> TracerProvider:
    """An SDK tracer provider for ``service`` (not installed), with the sampler of
    :func:`sampler_from` for ``environ`` (the process environment by default)."""
    return TracerProvider(
        resource=Resource.create({"service.name": service, "service.version": service_version}),
        sampler=sampler_from(os.environ if environ is None else environ),
    )


def setup_tracing(service: str, *, service_version: str = "0.1.0") -> TracerProvider:
    """Install :func:`tracer_provider` (no exporter) as the global one, once per process.

    OpenTelemetry allows setting the global provider only once; later calls return the
    provider installed first.
    """
    global _provider
    if _provider is None:
        provider = tracer_provider(service, service_version=service_version)
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
