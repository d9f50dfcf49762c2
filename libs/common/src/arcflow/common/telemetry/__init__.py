"""Telemetry shared by every service: redacted structured logs, Prometheus metrics, traces.

The metrics names (OpenTelemetry's Prometheus exporter and prometheus_client) are imported on
first use, so a process that serves no metrics does not pay for them.
"""

from typing import TYPE_CHECKING, Any

from arcflow.common.telemetry.logs import (
    JsonFormatter,
    RedactionFilter,
    TextFormatter,
    setup_logging,
)
from arcflow.common.telemetry.redaction import MASK, is_secret_key, redact_text, redact_value
from arcflow.common.telemetry.tracing import (
    current_trace_context,
    extract_trace_context,
    inject_trace_headers,
    setup_tracing,
    trace_headers_of,
)

if TYPE_CHECKING:
    from arcflow.common.telemetry.metrics import MetricsServer, setup_metrics


def __getattr__(name: str) -> Any:
    if name in ("MetricsServer", "setup_metrics"):
        from arcflow.common.telemetry import metrics

        value = getattr(metrics, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MASK",
    "JsonFormatter",
    "MetricsServer",
    "RedactionFilter",
    "TextFormatter",
    "current_trace_context",
    "extract_trace_context",
    "inject_trace_headers",
    "is_secret_key",
    "redact_text",
    "redact_value",
    "setup_logging",
    "setup_metrics",
    "setup_tracing",
    "trace_headers_of",
]
