"""Telemetry shared by every service: redacted structured logs, Prometheus metrics, traces."""

from arcflow.common.telemetry.logs import (
    JsonFormatter,
    RedactionFilter,
    TextFormatter,
    setup_logging,
)
from arcflow.common.telemetry.metrics import MetricsServer, setup_metrics
from arcflow.common.telemetry.redaction import MASK, is_secret_key, redact_text, redact_value
from arcflow.common.telemetry.tracing import (
    current_trace_context,
    extract_trace_context,
    inject_trace_headers,
    setup_tracing,
    trace_headers_of,
)

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
