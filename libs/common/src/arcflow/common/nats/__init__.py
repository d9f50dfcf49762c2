"""NATS for arcflow services: settings, JetStream declarations, publishing, reliable consuming.

Services do not wire these by hand: :mod:`arcflow.common.service` declares a service and runs it
(one connection, the JetStream layout, and FastStream subscribers by its public API that settle
each message with :class:`~arcflow.common.nats.consume.SettlePolicy`, ADR 0070). The listener
runs no FastStream and consumes nothing (ADR 0104). Publishing is the same everywhere::

    await publish_event(broker_or_js, subjects.audit_subject(ns, ars, variant), event)
"""

from typing import TYPE_CHECKING, Any

from arcflow.common.nats.connection import NatsConnection, NatsSettingsError
from arcflow.common.nats.consume import (
    Delivery,
    EventHandler,
    Outcome,
    PermanentEventError,
    build_dead_letter,
)
from arcflow.common.nats.jetstream import (
    CONSUMER_RECONCILER_ERRORS,
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_REGISTRAR_ARS,
    CONSUMERS,
    DUPLICATE_WINDOW_SECONDS,
    KV_BUCKETS,
    KV_SCALESETS,
    KV_WATCH,
    STREAM_AUDIT,
    STREAM_DLQ,
    STREAM_ERRORS,
    STREAM_JOBS,
    STREAM_K8S,
    STREAM_SCALE,
    STREAM_SCALESETS,
    STREAMS,
    ConsumerSpec,
    JetStreamLayout,
    KvBucketSpec,
    StreamSpec,
    auditor_consumer,
    ensure_bucket,
    ensure_consumer,
    ensure_jetstream,
    ensure_stream,
    stream_for_subject,
)
from arcflow.common.nats.permissions import (
    SERVICE_PERMISSIONS,
    Permissions,
    render_nats_authorization,
)
from arcflow.common.nats.publish import (
    EVENT_TYPE_HEADER,
    MSG_ID_HEADER,
    PublishTarget,
    publish_event,
)

if TYPE_CHECKING:
    from arcflow.common.nats.settings import NatsSettings, jetstream_of, make_broker

#: Imported on first use: pydantic-settings costs ~4 MiB a process on plain settings skips.
_SETTINGS_NAMES = frozenset({"NatsSettings", "jetstream_of", "make_broker"})


def __getattr__(name: str) -> Any:
    if name in _SETTINGS_NAMES:
        from arcflow.common.nats import settings

        value = getattr(settings, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONSUMERS",
    "CONSUMER_RECONCILER_ERRORS",
    "CONSUMER_RECONCILER_SCALESETS",
    "CONSUMER_REGISTRAR_ARS",
    "DUPLICATE_WINDOW_SECONDS",
    "EVENT_TYPE_HEADER",
    "KV_BUCKETS",
    "KV_SCALESETS",
    "KV_WATCH",
    "MSG_ID_HEADER",
    "SERVICE_PERMISSIONS",
    "STREAMS",
    "STREAM_AUDIT",
    "STREAM_DLQ",
    "STREAM_ERRORS",
    "STREAM_JOBS",
    "STREAM_K8S",
    "STREAM_SCALE",
    "STREAM_SCALESETS",
    "ConsumerSpec",
    "Delivery",
    "EventHandler",
    "JetStreamLayout",
    "KvBucketSpec",
    "NatsConnection",
    "NatsSettings",
    "NatsSettingsError",
    "Outcome",
    "PermanentEventError",
    "Permissions",
    "PublishTarget",
    "StreamSpec",
    "auditor_consumer",
    "build_dead_letter",
    "ensure_bucket",
    "ensure_consumer",
    "ensure_jetstream",
    "ensure_stream",
    "jetstream_of",
    "make_broker",
    "publish_event",
    "render_nats_authorization",
    "stream_for_subject",
]
