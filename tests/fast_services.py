"""Watcher, registrar and reconciler with fast test timings, as runs for the in-process runner
(:func:`arcflow.common.service.inprocess.running`)::

    async with running(*control_plane(...), kube=kube):
        ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arcflow.common.actions import ActionsClient, RetryPolicy
from arcflow.common.nats import NatsSettings
from arcflow.common.service.connection import ErrorHook
from arcflow.common.service.inprocess import ServiceRun
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.reconciler.settings import ReconcilerSettings
from arcflow.registrar.service import SERVICE as REGISTRAR
from arcflow.registrar.settings import RegistrarSettings
from arcflow.watcher.service import SERVICE as WATCHER
from arcflow.watcher.settings import WatcherSettings


def fast_actions_client(config_url: str, credentials: Any) -> ActionsClient:
    """The registrar's Actions client with retries that do not wait (tests use a simulator)."""
    return ActionsClient(config_url, credentials, retry=RetryPolicy.fast())


def control_plane(
    *,
    namespaces: list[str],
    nats_for: Callable[[str], NatsSettings],
    reconciler_settings: ReconcilerSettings,
    errors_for: Callable[[str], ErrorHook | None] = lambda _service: None,
) -> list[ServiceRun]:
    """The three control-plane services in start order; ``nats_for(service)`` gives each its
    NATS settings (e.g. its restricted user), ``errors_for`` an async-error hook."""
    watcher = WatcherSettings(
        namespaces=namespaces,
        resync_interval_seconds=0,
        checkpoint_interval_seconds=0.1,
        backoff_initial_seconds=0.05,
        backoff_max_seconds=0.5,
        publish_timeout_seconds=1.0,
    )
    registrar = RegistrarSettings(
        instance="r1",
        fetch_timeout_seconds=0.2,
        retry_delay_seconds=0.1,
        retry_delay_cap_seconds=0.5,
        resync_interval_seconds=0.5,
        lock_wait_seconds=2.0,
        lock_ttl_seconds=10.0,
    )
    return [
        ServiceRun(WATCHER, watcher, nats_for("watcher"), on_nats_error=errors_for("watcher")),
        ServiceRun(
            REGISTRAR,
            registrar,
            nats_for("registrar"),
            overrides={"client_factory": fast_actions_client},
            on_nats_error=errors_for("registrar"),
        ),
        ServiceRun(
            RECONCILER,
            reconciler_settings,
            nats_for("reconciler"),
            on_nats_error=errors_for("reconciler"),
        ),
    ]
