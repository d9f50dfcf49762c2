"""EphemeralRunnerSet (ERS): the desired runner count of one variant
(docs/upstream-behaviour.md#crds)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from arcflow.common.constants import KIND_ERS
from arcflow.common.models.base import KubeModel, KubeObject, ResourceMeta
from arcflow.common.models.ephemeral_runner import EphemeralRunnerSpec


class EphemeralRunnerSetSpec(KubeModel):
    """Desired runners. Serialised as Go does: ``replicas`` 0 is omitted, ``patchID`` never is."""

    _always_serialised: ClassVar[tuple[str, ...]] = ("patch_id",)
    _omitted_when_zero: ClassVar[tuple[str, ...]] = ("replicas",)

    replicas: int = 0
    """Desired number of runners."""
    patch_id: int = Field(default=0, alias="patchID")
    """Id of the listener patch that set ``replicas``; 0 forces a scale-down of idle runners."""
    ephemeral_runner_spec: EphemeralRunnerSpec = Field(default_factory=EphemeralRunnerSpec)
    ephemeral_runner_metadata: ResourceMeta | None = None
    """Labels and annotations for runners created after a change."""

    model_config = KubeModel.model_config | {"json_schema_extra": {"required": ["patchID"]}}


class EphemeralRunnerSetStatus(KubeModel):
    """Observed runners of the set."""

    _always_serialised: ClassVar[tuple[str, ...]] = ("current_replicas",)

    current_replicas: int = 0
    pending_ephemeral_runners: int = 0
    running_ephemeral_runners: int = 0
    failed_ephemeral_runners: int = 0
    phase: str = ""
    """``Running`` or ``Outdated``."""

    model_config = KubeModel.model_config | {"json_schema_extra": {"required": ["currentReplicas"]}}


class EphemeralRunnerSet(KubeObject):
    """The runners of one variant of an AutoscalingRunnerSet."""

    api_version: Literal["actions.github.com/v1alpha1"] = "actions.github.com/v1alpha1"
    kind: Literal["EphemeralRunnerSet"] = KIND_ERS
    spec: EphemeralRunnerSetSpec = Field(default_factory=EphemeralRunnerSetSpec)
    status: EphemeralRunnerSetStatus | None = None
