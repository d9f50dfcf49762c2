"""Outages read as a few clear lines: a nats-server restart gives one disconnected and one
reconnected line and no traceback; an unreachable Kubernetes API gives retry warnings, no
traceback; and the registrar keeps working once the server is back."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.common.nats import NatsSettings
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.nats_server import NatsServer, free_port
from arcflow.registrar.service import SERVICE
from tests.polling import eventually

from .harness import Stack, change_event
from .harness import test_settings as registrar_settings

pytestmark = pytest.mark.integration


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]


async def test_nats_restart_is_two_lines_and_no_traceback(
    private_nats_server: NatsServer, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runtime = ServiceRuntime(
        SERVICE,
        registrar_settings("outage"),
        nats_settings=NatsSettings(url=private_nats_server.url),
        kube=kube_client,
        serve_metrics=False,
        serve_health=False,
    )
    await runtime.start()
    try:
        private_nats_server.restart()

        async def reconnected() -> bool:
            return any(r.getMessage() == "NATS reconnected" for r in caplog.records)

        await eventually(reconnected, within=15)
        lines = [r.getMessage() for r in caplog.records if r.name == "arcflow.service.nats"]
        assert lines.count("NATS disconnected; reconnecting") == 1
        assert lines.count("NATS reconnected") == 1
        assert _tracebacks(caplog) == []
        assert runtime.ready
    finally:
        await runtime.stop()


async def test_unreachable_kubernetes_api_logs_no_traceback(
    stack: Stack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    kubeconfig = tmp_path / "dead-kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "dead", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}
                ],
                "users": [{"name": "dead", "user": {}}],
                "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "dead"}}],
                "current-context": "dead",
            }
        )
    )
    kube = await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(kubeconfig), request_timeout=1)
    )
    settings = registrar_settings("no-kube").model_copy(update={"resync_interval_seconds": 0.2})
    runtime = ServiceRuntime(
        SERVICE,
        settings,
        nats_settings=NatsSettings(url=stack.nats_url),
        kube=kube,
        serve_metrics=False,
        serve_health=False,
    )
    await runtime.start()
    try:
        await stack.publish_raw(change_event(stack.ars_manifest("far"), "ADDED"), dedup=True)

        async def retried() -> bool:  # the work queue retries the pass with backoff
            return any("reconcile failed; retrying" in r.getMessage() for r in caplog.records)

        await eventually(retried, within=15)
        assert _tracebacks(caplog) == []
    finally:
        await runtime.stop()
        await kube.close()
