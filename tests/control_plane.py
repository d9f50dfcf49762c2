"""Watcher, registrar and reconciler running in-process with fast test settings.

End-to-end tests (event-driven, no hand-published events) and the NATS permission tests both
need the same three services; this builds them once, with each service on the NATS
connection the test gives it (so a test can log each one in as its own restricted user).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from nats.aio.client import Client as NatsClient

from arcflow.common.actions import ActionsClient, RetryPolicy
from arcflow.common.kube import KubeClient
from arcflow.common.nats import NatsSettings
from arcflow.common.telemetry import setup_metrics
from arcflow.reconciler.app import ReconcilerApp
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.registrar.app import RegistrarApp
from arcflow.registrar.settings import RegistrarSettings
from arcflow.watcher.service import WatcherService
from arcflow.watcher.settings import WatcherSettings


def fast_actions_client(config_url: str, credentials: Any) -> ActionsClient:
    """The registrar's Actions client with retries that do not wait (tests use a simulator)."""
    return ActionsClient(config_url, credentials, retry=RetryPolicy.fast())


@contextlib.asynccontextmanager
async def running_control_plane(
    *,
    kube: KubeClient,
    namespaces: list[str],
    nats_url: str,
    watcher_nc: NatsClient,
    registrar_nc: NatsClient,
    reconciler_nc: NatsClient,
    reconciler_settings: ReconcilerSettings,
    metrics_name: str = "control-plane-test",
) -> AsyncIterator[None]:
    """Start watcher, registrar and reconciler; stop them in reverse order on exit."""
    metrics = setup_metrics(metrics_name, host="127.0.0.1", port=0)
    watcher = WatcherService(
        WatcherSettings(
            namespaces=namespaces,
            resync_interval_seconds=0,
            checkpoint_interval_seconds=0.1,
            backoff_initial_seconds=0.05,
            backoff_max_seconds=0.5,
            publish_timeout_seconds=1.0,
            nats=NatsSettings(url=nats_url),
        ),
        kube=kube,
        js=watcher_nc.jetstream(),
        meter=metrics.meter,
    )
    registrar = RegistrarApp(
        registrar_nc,
        kube,
        RegistrarSettings(
            instance="r1",
            health_host="127.0.0.1",
            health_port=0,
            fetch_timeout_seconds=0.2,
            retry_delay_seconds=0.1,
            retry_delay_cap_seconds=0.5,
            resync_interval_seconds=0.5,
            lock_wait_seconds=2.0,
            lock_ttl_seconds=10.0,
        ),
        client_factory=fast_actions_client,
    )
    reconciler = ReconcilerApp(reconciler_nc, kube, reconciler_settings)
    watcher.start()
    await registrar.start()
    await reconciler.start()
    await watcher.wait_ready()
    try:
        yield
    finally:
        await reconciler.stop()
        await registrar.stop()
        await watcher.stop()
        metrics.stop()
