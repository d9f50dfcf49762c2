"""Entities of the simulated Actions service and pure helpers that render them on the wire.

Kept free of I/O so the wire format (docs/upstream-behaviour.md#actions-endpoints,
#actions-messages) can be checked in
isolation from the HTTP server.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"
MAX_JOBS_PER_MESSAGE = 50
MAX_JOB_ATTEMPTS = 3
MESSAGE_TYPE = "RunnerScaleSetJobMessages"

_RUNTIME = "GitHub.Actions.Runtime.WebApi"
_TASK = "GitHub.DistributedTask.WebApi"


def _exc(namespace: str, name: str) -> str:
    return f"{namespace}.{name}, {namespace}"


class TypeNames:
    """.NET-style exception names carried in error bodies; clients match on substrings."""

    SESSION_CONFLICT = _exc(_RUNTIME, "RunnerScaleSetSessionConflictException")
    SCALE_SET_NOT_FOUND = _exc(_RUNTIME, "RunnerScaleSetNotFoundException")
    SCALE_SET_EXISTS = _exc(_RUNTIME, "RunnerScaleSetExistsException")
    SESSION_NOT_FOUND = _exc(_RUNTIME, "RunnerAdminException")
    RUNNER_GROUP_NOT_FOUND = _exc(_TASK, "TaskAgentPoolNotFoundException")
    AGENT_EXISTS = _exc(_TASK, "AgentExistsException")
    AGENT_NOT_FOUND = _exc(_TASK, "AgentNotFoundException")
    JOB_STILL_RUNNING = _exc(_TASK, "JobStillRunningException")
    ARGUMENT = "System.ArgumentException, mscorlib"
    UNAUTHORIZED = "GitHub.Services.WebApi.VssUnauthorizedException, GitHub.Services.WebApi"


class ServiceError(Exception):
    """A failure the service reports as ``{"typeName", "message"}`` with an HTTP status."""

    def __init__(self, status: int, type_name: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type_name = type_name
        self.message = message


class DroppedConnectionError(Exception):
    """The simulator closed the request's connection without an answer (a fault): the server
    records it with :data:`DROPPED` as its status and writes nothing."""


#: The request log's status of a request whose connection the simulator dropped.
DROPPED = 0


class JobState(enum.StrEnum):
    QUEUED = "queued"
    AVAILABLE = "available"
    ASSIGNED = "assigned"
    RUNNING = "running"
    COMPLETED = "completed"


class RunnerStatus(enum.StrEnum):
    CONFIGURED = "configured"
    IDLE = "online-idle"
    BUSY = "busy"


def rfc3339(moment: datetime | None) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix; Go clients reject anything else."""
    if moment is None:
        return ZERO_TIME
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utcnow() -> datetime:
    return datetime.now(UTC)


def lower_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    """Case-insensitive view of a JSON object, as a .NET service binds request bodies."""
    return {str(k).lower(): v for k, v in data.items()}


@dataclass
class RunnerGroup:
    id: int
    name: str
    is_default: bool = False

    def to_wire(self, size: int) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "size": size, "isDefaultGroup": self.is_default}


@dataclass
class Label:
    name: str
    type: str = "System"

    def to_wire(self) -> dict[str, str]:
        return {"type": self.type, "name": self.name}


@dataclass
class Statistics:
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0

    def to_wire(self) -> dict[str, int]:
        return {
            "totalAvailableJobs": self.total_available_jobs,
            "totalAcquiredJobs": self.total_acquired_jobs,
            "totalAssignedJobs": self.total_assigned_jobs,
            "totalRunningJobs": self.total_running_jobs,
            "totalRegisteredRunners": self.total_registered_runners,
            "totalBusyRunners": self.total_busy_runners,
            "totalIdleRunners": self.total_idle_runners,
        }


@dataclass
class ScaleSet:
    id: int
    name: str
    runner_group_id: int
    labels: list[Label]
    runner_setting: dict[str, Any]
    created_on: datetime
    max_capacity: int | None = None
    """Last ``X-ScaleSetMaxCapacity`` the listener reported; ``None`` until the first poll."""
    polls_received: int = 0
    """Message polls (E10) that reached the service, counted on arrival (a poll held open is
    counted at once; the request log records a request when it is answered)."""

    def label_names(self) -> set[str]:
        return {label.name.lower() for label in self.labels}

    def to_wire(
        self, group_name: str, svc_url: str, stats: Statistics | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "runnerGroupId": self.runner_group_id,
            "runnerGroupName": group_name,
            "labels": [label.to_wire() for label in self.labels],
            "RunnerSetting": dict(self.runner_setting),
            "createdOn": rfc3339(self.created_on),
            "runnerJitConfigUrl": (
                f"{svc_url}_apis/runtime/runnerscalesets/{self.id}/generatejitconfig"
            ),
        }
        if stats is not None:
            body["statistics"] = stats.to_wire()
        return body


@dataclass
class Message:
    id: int
    events: list[dict[str, Any]]


@dataclass
class Session:
    id: str
    scale_set_id: int
    owner: str
    token_id: str
    last_activity: float
    polls_in_flight: int = 0
    """An open long poll keeps a session alive however long it blocks."""


@dataclass
class Job:
    job_id: str
    runner_request_id: int
    labels: list[str]
    repository: str
    owner: str
    workflow_ref: str
    display_name: str
    event: str
    workflow_run_id: int
    duration: float | None
    result: str
    queue_time: datetime
    state: JobState = JobState.QUEUED
    attempt: int = 1
    scale_set_id: int | None = None
    offered_to: set[int] = field(default_factory=set)
    deferred_by: set[int] = field(default_factory=set)
    """Scale sets that asked to acquire the job while full: offered again once they have room."""
    reoffered_to: set[int] = field(default_factory=set)
    """Scale sets it was offered again to and that have not asked for it since."""
    runner_id: int | None = None
    runner_name: str = ""
    scale_set_assign_time: datetime | None = None
    runner_assign_time: datetime | None = None
    finish_time: datetime | None = None
    final_result: str | None = None

    def matches(self, scale_set: ScaleSet) -> bool:
        """A job runs on a scale set only if the set carries every label it asks for."""
        return {label.lower() for label in self.labels} <= scale_set.label_names()

    def to_public(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "runnerRequestId": self.runner_request_id,
            "state": self.state.value,
            "attempt": self.attempt,
            "labels": list(self.labels),
            "repositoryName": self.repository,
            "ownerName": self.owner,
            "jobWorkflowRef": self.workflow_ref,
            "jobDisplayName": self.display_name,
            "eventName": self.event,
            "scaleSetId": self.scale_set_id,
            "runnerId": self.runner_id,
            "runnerName": self.runner_name,
            "result": self.final_result,
        }


@dataclass
class Runner:
    id: int
    name: str
    scale_set_id: int
    work_folder: str
    secret: str
    status: RunnerStatus = RunnerStatus.CONFIGURED
    job_id: str | None = None
    session_id: str | None = None
    """Its runner-protocol session (docs/actions-simulator.md, "The runner's side"): such a
    runner reports its job's end itself, so a job's ``duration`` is not timed here."""

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "runnerScaleSetId": self.scale_set_id}


def job_message(
    kind: str,
    job: Job,
    *,
    acquire_url: str = "",
    runner_request_id: int | None = None,
    result: str | None = None,
    runner_id: int = 0,
    runner_name: str = "",
) -> dict[str, Any]:
    """One element of a message body (docs/upstream-behaviour.md#actions-messages); every kind
    carries the common fields."""
    body: dict[str, Any] = {
        "messageType": kind,
        "runnerRequestId": (
            job.runner_request_id if runner_request_id is None else runner_request_id
        ),
        "repositoryName": job.repository,
        "ownerName": job.owner,
        "jobId": job.job_id,
        "jobWorkflowRef": job.workflow_ref,
        "jobDisplayName": job.display_name,
        "workflowRunId": job.workflow_run_id,
        "eventName": job.event,
        "requestLabels": list(job.labels),
        "queueTime": rfc3339(job.queue_time),
        "scaleSetAssignTime": rfc3339(job.scale_set_assign_time),
        "runnerAssignTime": rfc3339(job.runner_assign_time),
        "finishTime": rfc3339(job.finish_time),
    }
    if kind == "JobAvailable":
        body["acquireJobUrl"] = acquire_url
    if kind in ("JobStarted", "JobCompleted"):
        body["runnerId"] = runner_id
        body["runnerName"] = runner_name
    if kind == "JobCompleted":
        body["result"] = result or ""
    return body


def message_envelope(message: Message, stats: Statistics) -> dict[str, Any]:
    """The E10 200 body: ``body`` is a JSON *string* holding the array (double-encoded)."""
    return {
        "messageId": message.id,
        "messageType": MESSAGE_TYPE,
        "body": json.dumps(message.events, separators=(",", ":")),
        "statistics": stats.to_wire(),
    }


def parse_labels(raw: Any, default_name: str) -> list[Label]:
    """Labels from a create/update body; a missing type becomes ``System`` as clients do."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ServiceError(400, TypeNames.ARGUMENT, "labels must be a list")
    labels: list[Label] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise ServiceError(400, TypeNames.ARGUMENT, "each label must be an object")
        entry = lower_keys(item)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ServiceError(400, TypeNames.ARGUMENT, "label name must be a non-empty string")
        label_type = entry.get("type") or "System"
        labels.append(Label(name=name, type=str(label_type)))
    if not labels and default_name:
        labels = [Label(name=default_name)]
    return labels


_KNOWN_SETTINGS = {
    "disableupdate": "disableUpdate",
    "ephemeral": "ephemeral",
    "iselastic": "isElastic",
}


def parse_runner_setting(raw: Any) -> dict[str, Any]:
    """``RunnerSetting`` (any key case); unknown keys are kept as sent."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ServiceError(400, TypeNames.ARGUMENT, "RunnerSetting must be an object")
    return {_KNOWN_SETTINGS.get(str(k).lower(), str(k)): v for k, v in raw.items()}


def parse_int_field(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServiceError(400, TypeNames.ARGUMENT, f"{what} must be an integer")
    return value


def count_list(items: Iterable[Any]) -> dict[str, Any]:
    values = list(items)
    return {"count": len(values), "value": values}
