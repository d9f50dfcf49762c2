"""The reconciler, declared: it creates, updates and deletes the Kubernetes objects arcflow owns."""

from __future__ import annotations

from dataclasses import replace

from arcflow.common.events import (
    ObjectWritten,
    RegistrationFailed,
    RunnerLifecycle,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SessionFailed,
    SessionOpened,
)
from arcflow.common.nats.jetstream import ConsumerSpec
from arcflow.common.service import PeriodicTask, Publication, ServiceSpec, Subscription
from arcflow.reconciler import errors_changes, scaleset_changes, state
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.settings import ReconcilerSettings, reconciler_kube_settings


def _tune(settings: ReconcilerSettings, spec: ConsumerSpec) -> ConsumerSpec:
    return replace(spec, retry_delay_seconds=settings.retry_base_seconds)


SERVICE: ServiceSpec[state.ReconcilerState] = ServiceSpec(
    name="reconciler",
    settings=ReconcilerSettings,
    build=state.build,
    components=state.components,
    kube_settings=lambda _settings: reconciler_kube_settings(),
    # What each controller reconciles, owns, watches and keeps (ADR 0095): the controller
    # runtime builds the cache, routing, work queue and adapters from it (state.py).
    controllers=DECLARED,
    # Kubernetes changes reach the reconciler only through its own watch-fed cache (cache.py,
    # ADR 0069); these are the other services' events no watch can see. Handlers only enqueue
    # keys (microseconds) and do not depend on event order (ADR 0070).
    subscriptions=(
        Subscription(
            scaleset_changes.CONSUMER,
            (ScaleSetAssigned, ScaleSetDeleted),
            scaleset_changes.on_scaleset_change,
            batch=128,
            concurrency=32,  # handlers only enqueue keys: order does not matter
            tune=_tune,
        ),
        Subscription(
            errors_changes.CONSUMER,
            (RegistrationFailed, SessionFailed, SessionOpened),
            errors_changes.on_registration_error,
            concurrency=16,  # newest per ARS/variant by occurred_at: order does not matter
            tune=_tune,
        ),
    ),
    periodic=(
        PeriodicTask("resync", lambda s: s.resync_interval_seconds, state.resync),
        PeriodicTask("orphans", lambda s: s.orphan_scan_seconds, state.orphan_scan),
    ),
    publishes=(Publication("arc.audit.<ns>.<ars>.<variant>", (ObjectWritten, RunnerLifecycle)),),
    ready=lambda s: s.resynced,
)
