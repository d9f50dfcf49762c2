"""Reconciler settings from the environment (``ARCFLOW_RECONCILER_*``).

NATS and Kubernetes connections have their own settings in ``arcflow.common``
(``ARCFLOW_NATS_*``, ``ARCFLOW_KUBE_*``); this class holds what the reconciler decides.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from arcflow.common.builders import BuildSettings
from arcflow.common.constants import LISTENER_DEFAULT_ENTRYPOINT
from arcflow.common.kube import KubeSettings
from arcflow.common.service.settings import Namespaces, ServiceSettings

# The reconciler reads from its watch-fed cache (ADR 0010), so every request it makes is a
# write that matters: the client limit only guards against a runaway loop and must not pace a
# burst of runners (about 6 writes each). See docs/reconciler.md, "Kubernetes client rate".
RECONCILER_KUBE_QPS = 200.0
RECONCILER_KUBE_BURST = 400


class ReconcilerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ARCFLOW_RECONCILER_", extra="ignore")

    controller_namespace: str = Field(
        default="arc-systems",
        description="Namespace of listeners and their config Secrets (upstream: the "
        "controller's own namespace)",
    )
    namespaces: Namespaces = Field(
        default_factory=list,
        description="Namespaces of the runner sets it manages, comma-separated; empty: all "
        "namespaces. When set, its cache lists and watches those namespaces (and the "
        "controller namespace for listeners, their pods, Secrets and ServiceAccounts) and "
        "nothing cluster-wide: what Roles in those namespaces allow (rbac.clusterWide=false)",
    )
    listener_image: str = Field(default="ghcr.io/arcflow/listener:latest")
    listener_image_pull_secrets: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated pull secret names for listener pods"
    )
    listener_entrypoint: str = LISTENER_DEFAULT_ENTRYPOINT
    listener_log_level: str = "info"
    listener_log_format: str = "text"
    listener_metrics_addr: str = ":8080"
    listener_metrics_endpoint: str = "/metrics"
    build_version: str = "dev"
    exclude_label_propagation_prefixes: Annotated[list[str], NoDecode] = Field(default_factory=list)
    listener_nats_url: str | None = Field(
        default=None,
        description="ARCFLOW_NATS_URL of listener pods. Unset: the reconciler's own "
        "ARCFLOW_NATS_URL (listener pods run in the controller namespace, next to the "
        "reconciler); empty: listener pods get no NATS env",
    )
    listener_nats_secret: str = Field(
        default="",
        description="Secret in the controller namespace with the listener's NATS credentials "
        "(keys user/password, or creds with listener_nats_auth=credsFile)",
    )
    listener_nats_auth: str = "userPassword"
    listener_nats_tls_secret: str = Field(
        default="", description="Secret in the controller namespace with ca.crt for NATS TLS"
    )

    listener_kube_qps: float = Field(
        default=50.0,
        gt=0,
        description="ARCFLOW_KUBE_QPS of listener pods: their Kubernetes client's sustained "
        "requests per second (upstream 0.15: 50); a listenerTemplate env entry still wins",
    )
    listener_kube_burst: int = Field(
        default=100, ge=1, description="ARCFLOW_KUBE_BURST of listener pods (upstream 0.15: 100)"
    )

    workers: int = Field(default=16, ge=1, description="Reconciles running at once")
    worker_caps: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=lambda: {"er": 12},
        description="Passes of one kind (ars, al, ers, er) running at once within the shared "
        "workers, as kind=count pairs (e.g. er=12,ers=8): a burst of runner passes leaves the "
        "other workers to sets and listeners; a kind not named is bounded by workers only",
    )
    drain_seconds: float = Field(
        default=20.0,
        ge=0,
        description="On SIGTERM, reconcile passes in flight may finish for this long before "
        "they are cancelled (no new pass starts); keep it under the pod's "
        "terminationGracePeriodSeconds (the chart derives it: the grace period less 10 s)",
    )
    create_concurrency: int = Field(
        default=16, ge=1, description="Runners of one EphemeralRunnerSet created at once"
    )
    status_interval_seconds: float = Field(
        default=5.0,
        ge=0,
        description="Counts-only status writes (ERS runner counts, ARS sums) go out at most "
        "this often per object; phase changes at once",
    )
    pending_status_delay_seconds: float = Field(
        default=5.0,
        ge=0,
        description="A new runner's first status write (registration and phase) waits this "
        "long for its pod to run before it says Pending (0: at once)",
    )
    runner_deadlines: str = Field(
        default="",
        description="Deadlines of a runner pod's start-up stages before it is recreated, as "
        "key=duration pairs (pending, imagePull, init, containerCreating, nodeLost; e.g. "
        "imagePull=5m); unset keys keep the defaults of docs/reconciler.md; an ARS overrides "
        "them with the arcflow.dev/runner-deadlines annotation",
    )
    orphan_scan_seconds: float = Field(
        default=120.0,
        ge=0,
        description="How often GitHub's runners of each scale set are compared with the "
        "EphemeralRunners (orphans removed; 0: never)",
    )
    orphan_grace_seconds: float = Field(
        default=60.0,
        ge=0,
        description="A GitHub runner or EphemeralRunner must look orphaned this long (two "
        "scans apart) before it is removed",
    )
    job_completed_grace_seconds: float = Field(
        default=120.0,
        ge=0,
        description="A runner whose job GitHub reported completed and whose pod still runs "
        "this long after is stopped and its EphemeralRunner removed (ADR 0100; 0: never)",
    )
    removal_concurrency: int = Field(
        default=16,
        ge=1,
        description="Runner removal calls (deregistration) at once, off the reconcile path "
        "(ADR 0101)",
    )
    cache_relist_seconds: float = Field(
        default=900.0, ge=0, description="Full relist of the cache guarding drift (0: never)"
    )
    retry_base_seconds: float = Field(default=0.5, gt=0, description="First retry delay")
    retry_cap_seconds: float = Field(default=60.0, gt=0)
    resync_interval_seconds: float = Field(
        default=60.0, gt=0, description="Period of the resync that re-queues every cached object"
    )
    outdated_backoff_base_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Wait before recreating a set whose runners are outdated again (doubles)",
    )
    outdated_backoff_cap_seconds: float = Field(default=3600.0, gt=0)
    fetch_batch: int = Field(
        default=128,
        ge=1,
        description="Messages pulled per fetch: handlers only enqueue keys, so a large fetch "
        "spends FastStream's one call per fetch on many events (ADR 0070)",
    )
    fetch_timeout_seconds: float = Field(default=1.0, gt=0)
    rpc_timeout_seconds: float = Field(default=10.0, gt=0)

    @field_validator("runner_deadlines")
    @classmethod
    def _deadlines_parse(cls, value: str) -> str:
        from arcflow.reconciler.controllers.reaper_rules import Deadlines, parse_deadlines

        parse_deadlines(value, Deadlines())  # a DeadlineSyntaxError is a ValueError
        return value

    @field_validator("worker_caps", mode="before")
    @classmethod
    def _parse_caps(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        caps: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            kind, sep, count = part.partition("=")
            if not sep or not count.strip().isdigit():
                raise ValueError(f"worker_caps: {part!r} is not kind=count")
            caps[kind.strip()] = int(count)
        return caps

    @field_validator("worker_caps")
    @classmethod
    def _caps_known(cls, value: dict[str, int]) -> dict[str, int]:
        from arcflow.reconciler.keys import KINDS

        for kind, count in value.items():
            if kind not in KINDS:
                raise ValueError(f"worker_caps: unknown kind {kind!r} (one of {', '.join(KINDS)})")
            if count < 1:
                raise ValueError(f"worker_caps: {kind} must be at least 1")
        return value

    @field_validator(
        "listener_image_pull_secrets", "exclude_label_propagation_prefixes", mode="before"
    )
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _default_listener_nats_url(self) -> ReconcilerSettings:
        """Unset means "where the reconciler itself connects" (the production default)."""
        if self.listener_nats_url is None:
            self.listener_nats_url = os.environ.get("ARCFLOW_NATS_URL", "")
        return self

    def build_settings(self) -> BuildSettings:
        """The builders' settings (validated there: a bad image or namespace fails here)."""
        return BuildSettings(
            controller_namespace=self.controller_namespace,
            listener_image=self.listener_image,
            listener_image_pull_secrets=tuple(self.listener_image_pull_secrets),
            listener_entrypoint=self.listener_entrypoint,
            log_level=self.listener_log_level,
            log_format=self.listener_log_format,
            listener_metrics_addr=self.listener_metrics_addr,
            listener_metrics_endpoint=self.listener_metrics_endpoint,
            build_version=self.build_version,
            exclude_label_propagation_prefixes=tuple(self.exclude_label_propagation_prefixes),
            listener_nats_url=self.listener_nats_url or "",
            listener_nats_secret=self.listener_nats_secret,
            listener_nats_auth=self.listener_nats_auth,
            listener_nats_tls_secret=self.listener_nats_tls_secret,
            listener_kube_qps=self.listener_kube_qps,
            listener_kube_burst=self.listener_kube_burst,
        )


def reconciler_kube_settings() -> KubeSettings:
    """``ARCFLOW_KUBE_*`` settings with the reconciler's own rate defaults.

    ``ARCFLOW_KUBE_QPS`` / ``ARCFLOW_KUBE_BURST``, when set, win; otherwise qps 200 / burst 400
    (the shared default stays 20/40 for the services that mostly watch).
    """
    settings = KubeSettings()
    updates: dict[str, object] = {}
    if "qps" not in settings.model_fields_set:
        updates["qps"] = RECONCILER_KUBE_QPS
    if "burst" not in settings.model_fields_set:
        updates["burst"] = RECONCILER_KUBE_BURST
    return settings.model_copy(update=updates) if updates else settings
