"""What every service's settings have: its name as a replica, logging, the metrics and health
servers. A service's settings class extends :class:`ServiceSettings` with what it decides and
its own ``env_prefix`` (``ARCFLOW_<SERVICE>_``); the runtime reads these fields (ADR 0006).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


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
