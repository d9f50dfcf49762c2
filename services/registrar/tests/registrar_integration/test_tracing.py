"""A converge pass continues the trace of the change event that queued its key: its span is a
child of the event's, and the ``scaleset.assigned`` events it publishes carry that trace on."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from arcflow.common import subjects
from arcflow.common.events import ScaleSetAssigned
from arcflow.common.nats import publish_event
from tests.polling import eventually

from .harness import Stack, change_event
from .test_lifecycle import registered

pytestmark = pytest.mark.integration


async def test_a_pass_continues_the_trace_of_its_event(stack: Stack) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar(run_sweep=False, tracer_provider=provider)
    created = await stack.kube.create(stack.ars_manifest("traced", [{"name": "a"}]))
    event = change_event(created, "ADDED")
    with provider.get_tracer("test-watcher").start_as_current_span("watch event") as span:
        trace_id = span.get_span_context().trace_id
        await publish_event(
            stack.js, subjects.k8s_subject(event.resource, event.namespace, event.name), event
        )
    await eventually(lambda: registered(stack, {"traced-a"}))

    async def pass_in_trace() -> list[object]:
        found = [
            s
            for s in exporter.get_finished_spans()
            if s.name == "converge ars" and s.context.trace_id == trace_id
        ]
        assert found, "no converge span in the event's trace"
        return found

    spans = await eventually(pass_in_trace)
    assert spans[0].attributes["arcflow.key"] == f"ars:{stack.namespace}/traced"
    assert spans[0].parent is not None

    async def assigned_in_trace() -> bool:
        events = await stack.stream_events("ARC_SCALESETS")
        assigned = [e for _, e in events if isinstance(e, ScaleSetAssigned)]
        assert assigned, "no scaleset.assigned yet"
        assert assigned[0].trace is not None
        assert f"{trace_id:032x}" in assigned[0].trace.traceparent
        return True

    await eventually(assigned_in_trace)
