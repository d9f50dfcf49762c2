"""Watcher settings from the environment (prefix ``ARCFLOW_WATCHER_``).

NATS and Kubernetes connection settings keep their shared prefixes (``ARCFLOW_NATS_``,
``ARCFLOW_KUBE_``) so every service is configured the same way.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from arcflow.common import constants
from arcflow.common.kube import KubeSettings, parse_label_selector
from arcflow.common.nats.settings import NatsSettings
from arcflow.common.service.settings import Namespaces, ServiceSettings

#: Pods and Secrets are watched only when they carry this label (runner and listener pods
#: inherit it from their ERS/AutoscalingListener; arcflow labels the secrets it creates).
DEFAULT_OWNED_SELECTOR: Final = f"{constants.LABEL_PART_OF}={constants.PART_OF_VALUE}"


class WatcherSettings(ServiceSettings):
    """Everything the watcher process reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="ARCFLOW_WATCHER_", extra="ignore")

    namespaces: Namespaces = Field(
        default_factory=list,
        description="namespaces to watch, comma-separated; empty: all namespaces",
    )
    pod_label_selector: str = Field(
        default=DEFAULT_OWNED_SELECTOR, description="label selector for the Pods to watch"
    )
    secret_label_selector: str = Field(
        default=DEFAULT_OWNED_SELECTOR, description="label selector for the Secrets to watch"
    )
    resync_interval_seconds: float = Field(
        default=600.0,
        ge=0,
        description="seconds between RESYNC rounds (one event per cached object); 0 disables",
    )
    checkpoint_interval_seconds: float = Field(
        default=2.0, gt=0, description="at most this often a changed resume point is saved"
    )
    watch_timeout_seconds: int = Field(
        default=300, ge=1, description="server-side watch timeout; the watch is then resumed"
    )
    backoff_initial_seconds: float = Field(default=0.2, gt=0)
    backoff_max_seconds: float = Field(default=10.0, gt=0)
    publish_timeout_seconds: float = Field(default=5.0, gt=0)
    nats: NatsSettings = Field(default_factory=NatsSettings)
    kube: KubeSettings = Field(default_factory=KubeSettings)

    @field_validator("pod_label_selector", "secret_label_selector")
    @classmethod
    def _valid_selector(cls, value: str) -> str:
        parse_label_selector(value)  # raises LabelSelectorError (a ValueError) with the reason
        return value
