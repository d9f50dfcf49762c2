"""The watcher's OpenTelemetry instruments (exported on the Prometheus endpoint).

Prometheus names (counters get ``_total``, the lag histogram ``_seconds``):
``arcflow_watcher_events_published_total{resource,change}``,
``arcflow_watcher_watch_restarts_total{resource,reason}``,
``arcflow_watcher_relists_total{resource,reason}``,
``arcflow_watcher_publish_errors_total{resource}``,
``arcflow_watcher_malformed_objects_total{resource}``,
``arcflow_watcher_publish_lag_seconds{resource}`` (now - when the change was seen).
"""

from __future__ import annotations

from typing import Final

from opentelemetry.metrics import Meter

LAG_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class WatcherMetrics:
    """One set of instruments, shared by every kind watcher (``resource`` tells them apart)."""

    def __init__(self, meter: Meter) -> None:
        self._published = meter.create_counter(
            "arcflow_watcher_events_published",
            description="Change events published (acknowledged by JetStream)",
        )
        self._watch_restarts = meter.create_counter(
            "arcflow_watcher_watch_restarts",
            description="Watches re-opened (reason: ended, error)",
        )
        self._relists = meter.create_counter(
            "arcflow_watcher_relists",
            description="Full lists (reason: initial, expired = after 410 Gone)",
        )
        self._publish_errors = meter.create_counter(
            "arcflow_watcher_publish_errors",
            description="Failed publish attempts (each is retried until it succeeds)",
        )
        self._malformed = meter.create_counter(
            "arcflow_watcher_malformed_objects",
            description="Objects from the API that could not be announced",
        )
        self._lag = meter.create_histogram(
            "arcflow_watcher_publish_lag",
            unit="s",
            description="Seconds from seeing a change to its PubAck",
            explicit_bucket_boundaries_advisory=list(LAG_BUCKETS),
        )

    def published(self, resource: str, change: str, lag_seconds: float) -> None:
        self._published.add(1, {"resource": resource, "change": change})
        self._lag.record(max(0.0, lag_seconds), {"resource": resource})

    def watch_restarted(self, resource: str, reason: str) -> None:
        self._watch_restarts.add(1, {"resource": resource, "reason": reason})

    def relisted(self, resource: str, reason: str) -> None:
        self._relists.add(1, {"resource": resource, "reason": reason})

    def publish_failed(self, resource: str) -> None:
        self._publish_errors.add(1, {"resource": resource})

    def malformed(self, resource: str) -> None:
        self._malformed.add(1, {"resource": resource})
