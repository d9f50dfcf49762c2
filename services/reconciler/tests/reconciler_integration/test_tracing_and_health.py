"""A reconcile continues the trace of the event that asked for it (a registrar event: a
Kubernetes change comes from the reconciler's own watch and starts a trace of its own, ADR
0069); /healthz and /readyz."""

from __future__ import annotations

import aiohttp
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from arcflow.common.kube import KubeClient
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import ars_manifest, build_stack, reconciler_runtime, reconciler_test_settings

pytestmark = pytest.mark.integration


async def test_reconcile_span_continues_the_trace_of_the_triggering_event(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, tracer_provider=provider
    ) as stack:
        await stack.register("traced", "", 5)
        await stack.kube.create(ars_manifest(stack.namespace, "traced"))
        with provider.get_tracer("test-registrar").start_as_current_span("assign") as span:
            trace_id = span.get_span_context().trace_id
            await stack.announce("traced", 5)

        async def reconciled_in_trace() -> list[object]:
            return [
                s
                for s in exporter.get_finished_spans()
                if s.name == "reconcile ars" and s.context.trace_id == trace_id
            ]

        spans = await eventually(reconciled_in_trace)
        reconcile = spans[0]
        assert reconcile.attributes["arcflow.key"] == f"ars:{stack.namespace}/traced"
        assert reconcile.parent is not None
        # keys from the resync and the watch (no event) start traces of their own
        others = [s for s in exporter.get_finished_spans() if s.context.trace_id != trace_id]
        assert all(s.name.startswith("reconcile ") for s in others)
    assert trace.get_current_span().get_span_context().is_valid is False


async def _status(port: int, path: str) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.json()


async def test_health_and_readiness(
    private_nats_server: NatsServer, kube_client: KubeClient
) -> None:
    runtime = reconciler_runtime(
        private_nats_server.url,
        kube_client,
        reconciler_test_settings(health_port=0, metrics_port=0),
        serve_health=True,
    )
    try:
        await runtime.start()
        port = runtime.health_port
        assert port is not None
        status, body = await _status(port, "/readyz")
        assert (status, body["status"], body["nats"]) == (200, "ready", True)
        assert (await _status(port, "/healthz"))[0] == 200
        # NATS gone (the server stops; the service reconnects for ever): alive, but not ready.
        # Not by closing the service's own connection under its running subscribers, which
        # only the runtime does, after stopping them (ADR 0070).
        private_nats_server.stop()

        async def not_ready() -> bool:
            assert (await _status(port, "/readyz"))[0] == 503
            return True

        await eventually(not_ready, what="/readyz answers 503 once NATS is gone")
        assert (await _status(port, "/healthz"))[0] == 200
    finally:
        await runtime.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _status(port, "/healthz")
