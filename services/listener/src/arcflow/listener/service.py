"""The listener, declared: per scale set, a GitHub session pump that stores each job batch on
JetStream and has it decided in-process before GitHub's ack (ADR 0104): it publishes job
batches and scale decisions and consumes nothing (the runtime's light path, ADR 0070)."""

from __future__ import annotations

from collections.abc import Sequence

from arcflow.common.events import JobsBatch, ScaleDecision, SessionFailed, SessionOpened
from arcflow.common.nats import STREAM_JOBS, STREAM_SCALE
from arcflow.common.service import (
    Component,
    Loop,
    Part,
    Publication,
    ServiceContext,
    ServiceSpec,
)
from arcflow.listener.app import Listener
from arcflow.listener.settings import ListenerSettings, load_settings

JOBS_SUBJECT = "arc.jobs.<ns>.<ars>.<variant>"


async def build(ctx: ServiceContext) -> Listener:
    """The listener (a test may hand its own as ``overrides["listener"]``) and its clients."""
    settings: ListenerSettings = ctx.settings
    listener = ctx.overrides.get("listener") or Listener(
        settings.config, settings.raw, settings.options
    )
    await listener.open(ctx.nc)
    return listener


def components(ctx: ServiceContext, listener: Listener) -> Sequence[Component]:
    """Its own ``/metrics`` (upstream's names and path), its clients, then its scale sets:
    stopped in reverse, so sessions are deleted before the clients close."""
    return (
        Part("metrics", listener.start_metrics, listener.metrics.stop),
        Part("clients", on_stop=listener.close),
        Loop("scale sets", listener.serve, ctx.fatal),
    )


SERVICE: ServiceSpec[Listener] = ServiceSpec(
    name="listener",
    settings=load_settings,
    build=build,
    components=components,
    streams=(STREAM_JOBS, STREAM_SCALE),
    runtime_servers=False,
    publishes=(
        Publication(JOBS_SUBJECT, (JobsBatch,)),
        Publication("arc.scale.<ns>.<ars>.<variant>", (ScaleDecision,)),
        # Session failures and recoveries for the ARS condition (ADR 0064, amendment); the
        # stream ARC_ERRORS is declared by the watcher, never by the listener.
        Publication("arc.errors.<ns>.<ars>", (SessionFailed, SessionOpened)),
    ),
)
