"""Reading OpenTelemetry counters in tests (an in-memory reader, not a scrape)."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def metric_total(reader: InMemoryMetricReader, name: str, **attributes: str) -> int:
    """The sum of a counter's points whose attributes include ``attributes``, as read now."""
    data = reader.get_metrics_data()
    return sum(
        int(point.value)
        for resource in (data.resource_metrics if data else [])
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
        if all(point.attributes.get(k) == v for k, v in attributes.items())
    )
