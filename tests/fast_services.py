"""Watcher, registrar and reconciler with fast test timings, as runs for the in-process runner
(:func:`arcflow.common.service.inprocess.running`)::

    async with running(*control_plane(...), kube=kube):
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.metrics import Meter

from arcflow.common.nats import NatsSettings
from arcflow.common.service.connection import ErrorHook
from arcflow.common.service.inprocess import ServiceRun
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.registrar.credentials import ClientFactory
from arcflow.registrar.service import SERVICE as REGISTRAR
from arcflow.watcher.service import SERVICE as WATCHER
from arcflow.watcher.settings import WatcherSettings
from services.registrar.tests.registrar_integration.harness import fast_client_factory
from services.registrar.tests.registrar_integration.harness import (
    test_settings as registrar_test_settings,
)


def control_plane(
    *,
    namespaces: list[str],
    nats_for: Callable[[str], NatsSettings],
    reconciler_settings: ReconcilerSettings,
    errors_for: Callable[[str], ErrorHook | None] = lambda _service: None,
    client_factory: ClientFactory = fast_client_factory,
    reconciler_overrides: Mapping[str, Any] | None = None,
    reconciler_meter: Meter | None = None,
) -> list[ServiceRun]:
    """The three control-plane services in start order; ``nats_for(service)`` gives each its
    NATS settings (e.g. its restricted user), ``errors_for`` an async-error hook,
    ``client_factory`` the registrar's Actions clients (retries without waiting by default),
    ``reconciler_overrides`` the reconciler's test overrides (e.g. ``{"context": {...}}``) and
    ``reconciler_meter`` where its metrics go."""
    watcher = WatcherSettings(
        namespaces=namespaces,
        resync_interval_seconds=0,
        checkpoint_interval_seconds=0.1,
        backoff_initial_seconds=0.05,
        backoff_max_seconds=0.5,
        publish_timeout_seconds=1.0,
    )
    # Every service watches only the test's namespaces: the session's API server is shared.
    registrar = registrar_test_settings("r1").model_copy(update={"namespaces": namespaces})
    reconciler_settings = reconciler_settings.model_copy(update={"namespaces": namespaces})
    return [
        ServiceRun(WATCHER, watcher, nats_for("watcher"), on_nats_error=errors_for("watcher")),
        ServiceRun(
            REGISTRAR,
            registrar,
            nats_for("registrar"),
            overrides={"client_factory": client_factory},
            on_nats_error=errors_for("registrar"),
        ),
        ServiceRun(
            RECONCILER,
            reconciler_settings,
            nats_for("reconciler"),
            overrides=reconciler_overrides or {},
            on_nats_error=errors_for("reconciler"),
            meter=reconciler_meter,
        ),
    ]
