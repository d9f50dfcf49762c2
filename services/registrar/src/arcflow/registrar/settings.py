"""Registrar settings from the environment (``ARCFLOW_REGISTRAR_*``).

NATS and Kubernetes connections have their own settings classes in ``arcflow.common``
(``ARCFLOW_NATS_*``, ``ARCFLOW_KUBE_*``); this class holds only what the registrar decides.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from arcflow.common.nats.jetstream import ConsumerSpec
from arcflow.common.service.settings import Namespaces, ServiceSettings


class RegistrarSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ARCFLOW_REGISTRAR_", extra="ignore")

    namespaces: Namespaces = Field(
        default_factory=list,
        description="Namespaces of the runner sets it registers, comma-separated; empty: all "
        "namespaces. When set, its ARS cache and its sweep list those namespaces and nothing "
        "cluster-wide: what Roles in those namespaces allow (rbac.clusterWide=false)",
    )
    fetch_batch: int = Field(default=16, ge=1, description="Messages pulled per fetch")
    fetch_timeout_seconds: float = Field(default=1.0, gt=0)
    converge_deadline_seconds: float = Field(
        default=45.0,
        gt=0,
        description="One converge pass may take this long; past it, it is cancelled and "
        "retried with backoff",
    )
    converge_concurrency: int = Field(
        default=16, ge=1, description="ARS converge passes run at once (one per ARS at a time)"
    )
    retry_delay_seconds: float = Field(
        default=1.0, gt=0, description="First retry delay of a failed pass (and first nak delay)"
    )
    retry_delay_cap_seconds: float = Field(default=60.0, gt=0)

    resync_interval_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Period of the sweep over registrations (pending deletions, lost events)",
    )
    verify_interval_seconds: float = Field(
        default=300.0,
        ge=0,
        description="How often the sweep asks GitHub whether each registered scale set still "
        "exists (one GET per scale set); a deleted one is registered again. 0: never",
    )
    lock_ttl_seconds: float = Field(
        default=30.0, gt=0, description="Lease of the per-ARS lock (taken over after expiry)"
    )
    lock_wait_seconds: float = Field(
        default=2.0, ge=0, description="How long a handler waits for a busy ARS lock"
    )

    actions_max_retries: int = Field(default=4, ge=0, description="HTTP retries per request")
    actions_retry_wait_max_seconds: float = Field(default=30.0, gt=0)
    client_cache_size: int = Field(default=64, ge=1, description="Cached Actions clients")
    rpc_concurrency: int = Field(default=32, ge=1, description="RPC requests served at once")


def tune_consumer(settings: RegistrarSettings, spec: ConsumerSpec) -> ConsumerSpec:
    """The consumer spec with the configured retry delays."""
    return replace(
        spec,
        retry_delay_seconds=settings.retry_delay_seconds,
        retry_delay_cap_seconds=settings.retry_delay_cap_seconds,
    )
