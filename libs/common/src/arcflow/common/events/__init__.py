"""The arcflow event catalog: typed, versioned, secret-free pydantic events.

Producers build a model (``K8sObjectChanged(source="watcher", ...)``) and publish it with
:func:`arcflow.common.nats.publish_event`; consumers get a parsed model from the reliable
consumer helper or call :func:`parse_event` themselves.
"""

from arcflow.common.events.catalog import (
    DEADLETTER_PAYLOAD_LIMIT,
    EVENT_REGISTRY,
    EVENT_TYPES,
    DeadLetter,
    Event,
    JobInfo,
    JobMessageType,
    JobsBatch,
    JobStatistics,
    K8sChange,
    K8sObjectChanged,
    MalformedEventError,
    ObjectWritten,
    OwnerRef,
    RegistrationFailed,
    RunnerLifecycle,
    ScaleDecision,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SpecInvalid,
    SpecIssue,
    WriteAction,
    encode_event,
    msg_id,
    parse_event,
)
from arcflow.common.events.envelope import (
    EventBase,
    EventKeys,
    TraceContext,
    new_event_id,
    utc_now,
)

__all__ = [
    "DEADLETTER_PAYLOAD_LIMIT",
    "EVENT_REGISTRY",
    "EVENT_TYPES",
    "DeadLetter",
    "Event",
    "EventBase",
    "EventKeys",
    "JobInfo",
    "JobMessageType",
    "JobStatistics",
    "JobsBatch",
    "K8sChange",
    "K8sObjectChanged",
    "MalformedEventError",
    "ObjectWritten",
    "OwnerRef",
    "RegistrationFailed",
    "RunnerLifecycle",
    "ScaleDecision",
    "ScaleSetAssigned",
    "ScaleSetDeleted",
    "SpecInvalid",
    "SpecIssue",
    "TraceContext",
    "WriteAction",
    "encode_event",
    "msg_id",
    "new_event_id",
    "parse_event",
    "utc_now",
]
