"""What every service's settings have: its name as a replica, logging, the metrics and health
servers. A service's settings class extends :class:`ServiceSettings` with what it decides and
its own ``env_prefix`` (``ARCFLOW_<SERVICE>_``); the runtime reads these fields (ADR 0070).
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_settings import BaseSettings, NoDecode

_DNS_LABEL_MAX: Final = 63
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def split_namespaces(value: object) -> object:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (an env var); anything else as given."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def valid_namespaces(value: list[str]) -> list[str]:
    """Each a namespace name (a DNS label); sorted, without duplicates."""
    for namespace in value:
        if len(namespace) > _DNS_LABEL_MAX or not _DNS_LABEL.fullmatch(namespace):
            raise ValueError(f"{namespace!r} is not a valid namespace name (DNS label)")
    return sorted(set(value))


#: A ``namespaces`` setting: comma-separated in the environment (``ARCFLOW_<SERVICE>_NAMESPACES``),
#: each a DNS label, sorted and deduplicated; empty means every namespace (cluster-wide).
Namespaces = Annotated[
    list[str], NoDecode, BeforeValidator(split_namespaces), AfterValidator(valid_namespaces)
]


class ServiceSettings(BaseSettings):
    """``instance``, ``log_json``, ``log_level``, ``metrics_host``/``metrics_port`` (Prometheus
    ``/metrics``) and ``health_host``/``health_port`` (``/healthz``, ``/readyz``)."""

    instance: str = Field(
        default="",
        description="Name of this replica (lock owner, logs); default: hostname and pid",
    )
    log_json: bool = True
    log_level: str = "INFO"
    metrics_host: str = "0.0.0.0"
    metrics_port: int = Field(default=8080, ge=0, le=65535, description="Prometheus /metrics")
    health_host: str = "0.0.0.0"
    health_port: int = Field(
        default=8081, ge=0, le=65535, description="/healthz and /readyz (the chart's health.port)"
    )
    profiling: bool = Field(
        default=False,
        description="Serve /debug/stacks (every thread and asyncio task) and /debug/memory "
        "(tracemalloc's top lines) on the health port; off by default (tracing costs memory)",
    )
