"""Read models of the core/v1 and RBAC children arcflow creates and follows (ADR 0071): the
runner and listener Pods, the JIT and listener Secrets, the listener's ServiceAccount, Role
and RoleBinding, and the ResourceQuotas a set's capacity may come from.

They model only what the reconciler reads; everything else a pod carries (its spec, new
status fields) is kept verbatim as unknown keys, shared with the document it was parsed from
(``from_observed``, ADR 0050), so a parse costs the modelled fields only. Builders still make
the manifests arcflow writes; these models never write.

A Secret models its metadata and ``type`` only: its ``data`` and ``stringData`` are neither
fields nor kept as unknown keys (``extra="ignore"``), so no repr, log line or exception of a
Secret model can show a value. :meth:`Secret.decoded_data` reads them from the observed
document when a caller needs them (the JIT config's runner id).
"""

from __future__ import annotations

import base64
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from arcflow.common.constants import RUNNER_CONTAINER
from arcflow.common.models.base import Int64, KubeModel, KubeObject, Quantity


class PodCondition(KubeModel):
    """One entry of ``status.conditions`` (``PodScheduled``, ``Initialized``, ``Ready``...)."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class ContainerStateWaiting(KubeModel):
    reason: str = ""
    message: str = ""


class ContainerStateRunning(KubeModel):
    started_at: str | None = None


class ContainerStateTerminated(KubeModel):
    exit_code: Int64 = 0
    reason: str = ""
    message: str = ""


class ContainerState(KubeModel):
    """At most one of the three is set (none before the kubelet reports)."""

    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(KubeModel):
    name: str = ""
    ready: bool = False
    state: ContainerState = Field(default_factory=ContainerState)
    #: The state it was in before its last restart (a restarted init container's failure).
    last_state: ContainerState = Field(default_factory=ContainerState)


class PodStatus(KubeModel):
    phase: str = ""
    reason: str = ""
    message: str = ""
    start_time: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    container_statuses: list[ContainerStatus] = Field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list)

    def condition(self, kind: str) -> PodCondition | None:
        """The condition of type ``kind``, or ``None``."""
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        """Whether the condition ``kind`` is there with status ``True``."""
        found = self.condition(kind)
        return found is not None and found.status == "True"

    def container(self, name: str) -> ContainerStatus | None:
        """The status of the (main) container ``name``, or ``None`` before it is reported."""
        return next((s for s in self.container_statuses if s.name == name), None)


class InitContainer(KubeModel):
    """An init container's name and its own ``restartPolicy`` (``Always``: a sidecar)."""

    name: str = ""
    restart_policy: str = ""


class PodSpec(KubeModel):
    """``nodeName`` and the init containers' names and restart policies; containers,
    volumes... stay verbatim (unknown keys)."""

    node_name: str = ""
    init_containers: list[InitContainer] = Field(default_factory=list)


class Pod(KubeObject):
    """A Pod as the reconciler follows it (the runner pod, the listener pod)."""

    api_version: str = "v1"
    kind: Literal["Pod"] = "Pod"
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def phase(self) -> str:
        """``status.phase`` (``""`` before the API server sets it)."""
        return self.status.phase

    @property
    def runner_state(self) -> ContainerState | None:
        """The runner container's state, or ``None`` while it is not reported."""
        found = self.status.container(RUNNER_CONTAINER)
        return None if found is None else found.state


class Secret(KubeObject):
    """A Secret's metadata and type; never its values (see the module docstring)."""

    model_config = KubeObject.model_config | ConfigDict(extra="ignore")
    _always_serialised: ClassVar[tuple[str, ...]] = ("api_version", "kind")

    api_version: str = "v1"
    kind: Literal["Secret"] = "Secret"
    type: str = ""

    def decoded_data(self) -> dict[str, str]:
        """The observed document's ``data``, base64-decoded (values never enter the model)."""
        data = self.manifest.get("data") or {}
        return {k: base64.b64decode(v).decode("utf-8") for k, v in data.items()}


class ServiceAccount(KubeObject):
    """The listener's ServiceAccount (compared by metadata only)."""

    api_version: str = "v1"
    kind: Literal["ServiceAccount"] = "ServiceAccount"


class Role(KubeObject):
    """The listener's Role; its rules stay verbatim (unknown keys)."""

    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: Literal["Role"] = "Role"


class RoleBinding(KubeObject):
    """The listener's RoleBinding; subjects and roleRef stay verbatim (unknown keys)."""

    api_version: str = "rbac.authorization.k8s.io/v1"
    kind: Literal["RoleBinding"] = "RoleBinding"


class ResourceQuotaSpec(KubeModel):
    """The hard limits of a ResourceQuota (resource name -> quantity); its scopes and
    selectors stay verbatim (unknown keys)."""

    hard: dict[str, Quantity] | None = None


class ResourceQuota(KubeObject):
    """A ResourceQuota of a set's namespace, read for ``capacity.fromResourceQuota`` (ADR
    0062); its status stays verbatim."""

    api_version: str = "v1"
    kind: Literal["ResourceQuota"] = "ResourceQuota"
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec)
