"""What ``kubectl get`` shows for the four actions.github.com kinds.

The columns go into the generated CRDs (``scripts/generate_crds.py``, as
``additionalPrinterColumns``) and the Kubernetes API emulator serves the same columns in its
Table responses when no CRD object was created in it. They are upstream's columns (minus those
that point at status fields that do not exist, docs/upstream-behaviour.md#crds) plus
arcflow's per-variant ones: the variant of an EphemeralRunnerSet and its GitHub scale set,
and the scale set id of each variant on the AutoscalingRunnerSet. JSON paths are simple field
paths (``\\.`` escapes a dot in a label or annotation key), plus one equality filter on the
conditions list for the registration column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from arcflow.common import constants


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    """0: always shown; 1: only with ``kubectl get -o wide``."""

    def render(self) -> dict[str, Any]:
        """The ``additionalPrinterColumns`` entry of a CRD version."""
        column: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.priority:
            column["priority"] = self.priority
        return column


def _escaped(key: str) -> str:
    return key.replace(".", "\\.")


_VARIANT_LABEL: Final = f".metadata.labels.{_escaped(constants.LABEL_RUNNER_VARIANT)}"
_SCALE_SET_NAME: Final = f".metadata.annotations.{_escaped(constants.ANNOTATION_SCALE_SET_NAME)}"
_SCALE_SET_IDS: Final = f".metadata.annotations.{_escaped(constants.ANNOTATION_SCALE_SET_IDS)}"
_SCALE_SET_ID: Final = f".metadata.annotations.{_escaped(constants.ANNOTATION_SCALE_SET_ID)}"
#: The reason of the ARS's ``ScaleSetsRegistered`` condition (ADR 0064): empty for a set that
#: never failed, the failure's reason (``GitHubUnreachable``...) while it fails, ``Registered``
#: once it recovered.
_REGISTRATION: Final = '.status.conditions[?(@.type=="ScaleSetsRegistered")].reason'
#: The reason of ``ListenerSessionsOpen`` (ADR 0064, amendment): empty for a set whose
#: listener never failed to open a session, ``SessionConflict``... while one fails,
#: ``SessionsOpen`` once every session is open again.
_SESSIONS: Final = '.status.conditions[?(@.type=="ListenerSessionsOpen")].reason'

PRINTER_COLUMNS: Final[dict[str, tuple[PrinterColumn, ...]]] = {
    constants.KIND_ARS: (
        PrinterColumn("Minimum Runners", ".spec.minRunners", "integer"),
        PrinterColumn("Maximum Runners", ".spec.maxRunners", "integer"),
        PrinterColumn("Current Runners", ".status.currentRunners", "integer"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Pending Runners", ".status.pendingEphemeralRunners", "integer"),
        PrinterColumn("Running Runners", ".status.runningEphemeralRunners", "integer"),
        PrinterColumn("Registration", _REGISTRATION),
        PrinterColumn("Sessions", _SESSIONS),
        PrinterColumn("Drain", ".status.drain"),  # ADR 0062: Draining, then Drained
        PrinterColumn("Scale Set ID", _SCALE_SET_ID, priority=1),
        PrinterColumn("Variant Scale Set IDs", _SCALE_SET_IDS),
    ),
    constants.KIND_ERS: (
        PrinterColumn("Variant", _VARIANT_LABEL),
        PrinterColumn("DesiredReplicas", ".spec.replicas", "integer"),
        PrinterColumn("CurrentReplicas", ".status.currentReplicas", "integer"),
        PrinterColumn("Pending Runners", ".status.pendingEphemeralRunners", "integer"),
        PrinterColumn("Running Runners", ".status.runningEphemeralRunners", "integer"),
        PrinterColumn("Failed Runners", ".status.failedEphemeralRunners", "integer"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Scale Set", _SCALE_SET_NAME),
    ),
    constants.KIND_ER: (
        PrinterColumn("GitHub Config URL", ".spec.githubConfigUrl"),
        PrinterColumn("RunnerId", ".status.runnerId", "number"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("JobRepository", ".status.jobRepositoryName"),
        PrinterColumn("JobWorkflowRef", ".status.jobWorkflowRef"),
        PrinterColumn("WorkflowRunId", ".status.workflowRunId", "number"),
        PrinterColumn("JobDisplayName", ".status.jobDisplayName"),
        PrinterColumn("JobId", ".status.jobId"),
        PrinterColumn("Message", ".status.message"),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    ),
    constants.KIND_AL: (
        PrinterColumn("GitHub Configure URL", ".spec.githubConfigUrl"),
        PrinterColumn("AutoscalingRunnerSet Namespace", ".spec.autoscalingRunnerSetNamespace"),
        PrinterColumn("AutoscalingRunnerSet Name", ".spec.autoscalingRunnerSetName"),
    ),
}

#: ``kubectl get ars`` / ``ers`` / ``er``; upstream's CRDs have no short names.
SHORT_NAMES: Final[dict[str, tuple[str, ...]]] = {
    constants.KIND_ARS: ("ars",),
    constants.KIND_ERS: ("ers",),
    constants.KIND_ER: ("er",),
}
