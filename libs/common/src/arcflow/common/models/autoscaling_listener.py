"""AutoscalingListener (AL): the listener pod's desired state, one per ARS
(docs/upstream-behaviour.md#crds)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from arcflow.common.constants import KIND_AL
from arcflow.common.models.base import (
    KubeModel,
    KubeObject,
    LocalObjectReference,
    PodTemplate,
    ResourceMeta,
    RunnerCount,
)
from arcflow.common.models.config import (
    GitHubServerTLSConfig,
    MetricsConfig,
    ProxyConfig,
    VaultConfig,
)


class AutoscalingListenerSpec(KubeModel):
    """What the listener pod connects to and which runner set it scales.

    ``minRunners``/``maxRunners`` are Go ``int,omitempty``: 0 is not serialised.
    """

    _omitted_when_zero: ClassVar[tuple[str, ...]] = ("min_runners", "max_runners")

    github_config_url: str = ""
    github_config_secret: str = ""
    runner_scale_set_id: int = 0
    autoscaling_runner_set_namespace: str = ""
    autoscaling_runner_set_name: str = ""
    ephemeral_runner_set_name: str = ""
    max_runners: RunnerCount = 0
    min_runners: RunnerCount = 0
    image: str = ""
    """Listener container image."""
    image_pull_secrets: list[LocalObjectReference] | None = None
    proxy: ProxyConfig | None = None
    github_server_tls: GitHubServerTLSConfig | None = Field(default=None, alias="githubServerTLS")
    vault_config: VaultConfig | None = None
    metrics: MetricsConfig | None = None
    template: PodTemplate | None = None
    """Merged into the listener pod."""
    config_secret_metadata: ResourceMeta | None = None
    service_account_metadata: ResourceMeta | None = None
    role_metadata: ResourceMeta | None = None
    role_binding_metadata: ResourceMeta | None = None


class AutoscalingListenerStatus(KubeModel):
    """Upstream defines no status fields."""


class AutoscalingListener(KubeObject):
    """The listener of an AutoscalingRunnerSet (lives in the controller namespace)."""

    api_version: Literal["actions.github.com/v1alpha1"] = "actions.github.com/v1alpha1"
    kind: Literal["AutoscalingListener"] = KIND_AL
    spec: AutoscalingListenerSpec = Field(default_factory=AutoscalingListenerSpec)
    status: AutoscalingListenerStatus | None = None
