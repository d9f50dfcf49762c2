"""Structured logging with secret redaction and trace correlation.

``setup_logging`` installs one stream handler on the root logger. Every record goes through
:class:`RedactionFilter` (message, arguments and ``extra`` fields) and the formatter redacts
the final text once more, so tracebacks and third-party messages are covered too. JSON lines
carry ``trace_id``/``span_id`` when a span is active, tying logs to traces.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from opentelemetry import trace

from arcflow.common.telemetry.redaction import MASK, is_secret_key, redact_text, redact_value

#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD_ATTRS: Final = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
    | {"message", "asctime", "taskName"}
)

_HANDLER_MARK: Final = "_arcflow_handler"


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra=`` fields of a record."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS}


class RedactionFilter(logging.Filter):
    """Rewrite a record in place so no secret survives in its message or extra fields."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken %-format must not lose the log line
            message = f"{record.msg!s} (unformattable args)"
        record.msg = redact_text(message)
        record.args = None
        for key, value in record_extras(record).items():
            setattr(record, key, MASK if is_secret_key(key) else redact_value(value))
        return True


def _trace_ids() -> dict[str, str]:
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, service, message, extras, trace ids."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "service": self.service,
            "msg": record.getMessage(),
        }
        entry.update(_trace_ids())
        for key, value in record_extras(record).items():
            entry.setdefault(key, MASK if is_secret_key(key) else redact_value(value))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return redact_text(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    """Human-readable lines for local runs, extras appended as ``key=value``, redacted."""

    def __init__(self, service: str) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = record_extras(record)
        if extras:
            text += " " + " ".join(f"{k}={v}" for k, v in sorted(extras.items()))
        return redact_text(text)


def setup_logging(
    service: str,
    *,
    json_output: bool = True,
    level: int | str = logging.INFO,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Configure the root logger for a service; idempotent (replaces our previous handler).

    Returns the handler so tests (and callers that log elsewhere) can reuse the same
    redaction and format.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(service) if json_output else TextFormatter(service))
    handler.addFilter(RedactionFilter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, _HANDLER_MARK, False):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # faststream and nats-py are chatty per message, httpx (the Kubernetes and Actions
    # clients) logs every request at INFO; keep them at WARNING unless asked.
    for noisy in ("faststream", "nats", "httpx"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    return handler
