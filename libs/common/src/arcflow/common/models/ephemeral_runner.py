"""EphemeralRunner (ER): one single-use runner, its pod template and its job
(docs/upstream-behaviour.md#crds)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from arcflow.common.constants import ENV_CONTAINER_HOOKS, KIND_ER, RUNNER_CONTAINER
from arcflow.common.models.base import Int64, KubeModel, KubeObject, PodTemplate, ResourceMeta
from arcflow.common.models.config import GitHubServerTLSConfig, ProxyConfig, VaultConfig


class EphemeralRunnerPhase(StrEnum):
    """Values of ``status.phase`` (compare with plain strings: StrEnum members are str)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUTDATED = "Outdated"


_DONE_PHASES = frozenset(
    {EphemeralRunnerPhase.SUCCEEDED, EphemeralRunnerPhase.FAILED, EphemeralRunnerPhase.OUTDATED}
)


class EphemeralRunnerSpec(KubeModel):
    """How to register one runner and the pod that runs it (an inline PodTemplateSpec)."""

    _always_serialised: ClassVar[tuple[str, ...]] = (
        "github_config_url",
        "github_config_secret",
        "runner_scale_set_id",
    )

    github_config_url: str = ""
    github_config_secret: str = ""
    runner_scale_set_id: int = 0
    github_server_tls: GitHubServerTLSConfig | None = Field(default=None, alias="githubServerTLS")
    proxy: ProxyConfig | None = None
    proxy_secret_ref: str = ""
    """Secret with the proxy environment for the runner pod."""
    vault_config: VaultConfig | None = None
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    pod_metadata: PodTemplate | None = Field(default=None, alias="metadata")
    """Pod template metadata (inline PodTemplateSpec ``metadata``)."""
    pod_spec: PodTemplate | None = Field(default=None, alias="spec")
    """Pod spec (inline PodTemplateSpec ``spec``)."""

    def pod_template(self) -> dict[str, Any]:
        """The inline pod template as a PodTemplateSpec dict (only the parts that are set)."""
        template: dict[str, Any] = {}
        if self.pod_metadata is not None:
            template["metadata"] = self.pod_metadata
        if self.pod_spec is not None:
            template["spec"] = self.pod_spec
        return template

    model_config = KubeModel.model_config | {
        "json_schema_extra": {
            "required": ["githubConfigSecret", "githubConfigUrl", "runnerScaleSetId"]
        }
    }


class EphemeralRunnerStatus(KubeModel):
    """Observed state of one runner and the job it took."""

    ready: bool = False
    phase: str = ""
    """``Pending``, ``Running``, ``Succeeded``, ``Failed`` or ``Outdated``."""
    reason: str = ""
    message: str = ""
    runner_id: int = 0
    runner_name: str = ""
    failures: dict[str, str] | None = None
    """Pod UID -> time of the failure, for crash-loop backoff."""
    job_request_id: Int64 = 0
    job_id: str = ""
    job_repository_name: str = ""
    job_workflow_ref: str = ""
    workflow_run_id: Int64 = 0
    job_display_name: str = ""


class EphemeralRunner(KubeObject):
    """A single-use GitHub Actions runner and its pod."""

    api_version: Literal["actions.github.com/v1alpha1"] = "actions.github.com/v1alpha1"
    kind: Literal["EphemeralRunner"] = KIND_ER
    spec: EphemeralRunnerSpec = Field(default_factory=EphemeralRunnerSpec)
    status: EphemeralRunnerStatus | None = None

    def is_done(self) -> bool:
        """The runner finished: Succeeded, Failed or Outdated."""
        return self.status is not None and self.status.phase in _DONE_PHASES

    def has_job(self) -> bool:
        """A job was assigned (status.jobId is set); such a runner must never be killed."""
        return self.status is not None and bool(self.status.job_id)

    def runner_working_dir(self) -> str:
        """The ``runner`` container's ``workingDir`` (``""`` when unset): the JIT config's
        work folder."""
        for container in (self.spec.pod_spec or {}).get("containers") or []:
            if isinstance(container, dict) and container.get("name") == RUNNER_CONTAINER:
                return str(container.get("workingDir") or "")
        return ""

    def has_container_hook_configured(self) -> bool:
        """The ``runner`` container sets ACTIONS_RUNNER_CONTAINER_HOOKS (kubernetes mode)."""
        pod_spec = self.spec.pod_spec or {}
        for container in pod_spec.get("containers") or []:
            if not isinstance(container, dict) or container.get("name") != RUNNER_CONTAINER:
                continue
            for env in container.get("env") or []:
                if isinstance(env, dict) and env.get("name") == ENV_CONTAINER_HOOKS:
                    return True
        return False
