"""Every arcflow event type, the discriminated union and the bytes <-> event codec.

Each model pins ``type`` with a ``Literal`` so :func:`parse_event` picks the right class from
the JSON alone. None of these models has a field that could hold a secret: Kubernetes changes
carry metadata (no spec, no ``data``), job messages carry ids and names (no tokens, no JIT
config), dead letters carry a redacted, truncated copy of the offending bytes.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import Field, TypeAdapter, ValidationError

from arcflow.common.events.envelope import EventBase, EventModel

# --- Kubernetes ---------------------------------------------------------------------------

K8sChange = Literal["ADDED", "MODIFIED", "DELETED", "RESYNC"]


class OwnerRef(EventModel):
    """An ownerReference, enough to map a pod or secret to the object that owns it."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


class K8sObjectChanged(EventBase):
    """The watcher saw a Kubernetes object change (level trigger: "re-read key K").

    Only metadata: never ``spec``, ``data``, ``stringData`` or annotations (which may hold a
    ``last-applied-configuration`` copy of a Secret).
    """

    type: Literal["k8s.object.changed"] = "k8s.object.changed"
    api_version: str
    kind: str
    resource: str = Field(description="Lower-case plural resource name, as in the subject")
    namespace: str
    name: str
    uid: str
    change: K8sChange
    resource_version: str
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerRef] = Field(default_factory=list)
    deletion_timestamp: datetime | None = None

    def dedup_key(self) -> str | None:
        """uid + resourceVersion + change: a replayed watch stores one copy; resyncs all count."""
        if self.change == "RESYNC":
            return None
        return f"{self.uid}:{self.resource_version}:{self.change}"


# --- registrar ----------------------------------------------------------------------------


class ScaleSetAssigned(EventBase):
    """The registrar created or updated the GitHub runner scale set of one variant."""

    type: Literal["scaleset.assigned"] = "scaleset.assigned"
    variant: str = ""
    scale_set_id: int = Field(gt=0)
    scale_set_name: str
    runner_group_id: int
    runner_group_name: str
    labels: list[str] = Field(default_factory=list)
    ars_generation: int | None = None


class ScaleSetDeleted(EventBase):
    """The registrar deleted a scale set (variant removed or ARS deleted)."""

    type: Literal["scaleset.deleted"] = "scaleset.deleted"
    variant: str = ""
    scale_set_id: int
    scale_set_name: str
    reason: str = ""


class RegistrationFailed(EventBase):
    """The registrar could not register a variant's scale set."""

    type: Literal["registration.failed"] = "registration.failed"
    variant: str = ""
    scale_set_name: str = ""
    reason: str
    retryable: bool = True
    #: What failed: ``credentials`` (the Secret is missing or malformed), ``connection`` (the
    #: CA ConfigMap or a proxy Secret), ``unreachable`` (no answer from the config URL:
    #: DNS, refused, timeouts, 5xx after the retries), ``refused`` (401/403: the credentials
    #: were refused), ``rejected`` (any other answer), ``scale_set_gone`` (deleted on the
    #: GitHub side; re-registered). Empty from a registrar before ADR 0064.
    kind: str = ""


class SpecIssue(EventModel):
    """One problem in an ARS spec: where (a JSON-path-like string) and what."""

    path: str
    message: str


class SpecInvalid(EventBase):
    """An ARS spec failed validation; nothing was written for it."""

    type: Literal["spec.invalid"] = "spec.invalid"
    generation: int | None = None
    errors: list[SpecIssue] = Field(min_length=1)


# --- listener -----------------------------------------------------------------------------


class JobStatistics(EventModel):
    """The scale set's statistics from a GitHub message (scale on ``total_assigned_jobs``)."""

    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


JobMessageType = Literal["JobAvailable", "JobAssigned", "JobStarted", "JobCompleted"]


class JobInfo(EventModel):
    """One job message of a batch, stripped of anything but identities, names and times."""

    message_type: JobMessageType
    runner_request_id: int = 0
    job_id: str = ""
    repository_name: str = ""
    owner_name: str = ""
    job_workflow_ref: str = ""
    job_display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    request_labels: list[str] = Field(default_factory=list)
    runner_id: int = 0
    runner_name: str = ""
    result: str = ""
    queue_time: datetime | None = None
    scale_set_assign_time: datetime | None = None
    runner_assign_time: datetime | None = None
    finish_time: datetime | None = None


class JobsBatch(EventBase):
    """One GitHub message (statistics + job messages), handed to JetStream before GitHub's ack."""

    type: Literal["jobs.batch"] = "jobs.batch"
    scale_set_id: int
    message_id: int
    statistics: JobStatistics
    jobs: list[JobInfo] = Field(default_factory=list)
    #: The GitHub message session the message came from; message ids compare only within one.
    session_id: str = ""

    def dedup_key(self) -> str | None:
        """A GitHub message redelivered after a listener crash is stored once."""
        return f"{self.scale_set_id}:{self.message_id}"


class ScaleDecision(EventBase):
    """A listener worker decided a desired replica count and patched its ERS."""

    type: Literal["scale.decision"] = "scale.decision"
    scale_set_id: int
    ephemeral_runner_set: str
    desired_replicas: int = Field(ge=0)
    patch_id: int
    assigned_jobs: int
    min_runners: int
    max_runners: int
    reason: str = ""


class SessionFailed(EventBase):
    """A listener could not open the message session of one scale set (ADR 0064 amendment).

    Published once per failure streak (the first failed create after a session was open, or
    after the pump started), not per retry, on ``arc.errors.<ns>.<ars>``; the reconciler turns
    it into the ARS condition ``ListenerSessionsOpen``. ``message`` is the exception's type
    and the service's short answer, never a token or URL with a secret."""

    type: Literal["session.failed"] = "session.failed"
    variant: str = ""
    scale_set_id: int = 0
    #: ``nil_session_id`` (200 with the nil session id), ``conflict`` (409: another session
    #: holds the scale set), ``not_found`` (404: GitHub no longer has the scale set) or
    #: ``error`` (anything else); the listener's metric label.
    reason: str
    message: str = ""


class SessionOpened(EventBase):
    """The listener opened the message session of one scale set: the first session of the
    pump, or the first after a :class:`SessionFailed` (not every session)."""

    type: Literal["session.opened"] = "session.opened"
    variant: str = ""
    scale_set_id: int = 0


# --- reconciler ---------------------------------------------------------------------------

WriteAction = Literal["created", "patched", "deleted"]


class ObjectWritten(EventBase):
    """Audit: the reconciler wrote a Kubernetes object, and why."""

    type: Literal["object.written"] = "object.written"
    action: WriteAction
    kind: str
    namespace: str
    name: str
    why: str
    ars: str | None = None
    variant: str | None = None
    uid: str | None = None


class RunnerLifecycle(EventBase):
    """An EphemeralRunner changed phase."""

    type: Literal["runner.lifecycle"] = "runner.lifecycle"
    runner_name: str
    phase: str
    previous_phase: str | None = None
    runner_id: int | None = None
    job_request_id: int | None = None
    reason: str = ""
    message: str = ""


# --- dead letters -------------------------------------------------------------------------

DEADLETTER_PAYLOAD_LIMIT: Final = 8 * 1024


class DeadLetter(EventBase):
    """A message that could not be handled, with the reason and a redacted, truncated copy."""

    type: Literal["deadletter"] = "deadletter"
    original_subject: str
    reason: str
    delivery_count: int = Field(ge=0)
    consumer: str | None = None
    original_msg_id: str | None = None
    payload: str = Field(description="Original bytes as UTF-8 (replacement chars), redacted")
    payload_size: int = Field(ge=0)
    payload_truncated: bool = False


# --- union and codec ----------------------------------------------------------------------

Event = Annotated[
    K8sObjectChanged
    | ScaleSetAssigned
    | ScaleSetDeleted
    | RegistrationFailed
    | SpecInvalid
    | JobsBatch
    | ScaleDecision
    | SessionFailed
    | SessionOpened
    | ObjectWritten
    | RunnerLifecycle
    | DeadLetter,
    Field(discriminator="type"),
]

EVENT_TYPES: Final[tuple[type[EventBase], ...]] = (
    K8sObjectChanged,
    ScaleSetAssigned,
    ScaleSetDeleted,
    RegistrationFailed,
    SpecInvalid,
    JobsBatch,
    ScaleDecision,
    SessionFailed,
    SessionOpened,
    ObjectWritten,
    RunnerLifecycle,
    DeadLetter,
)

#: ``type`` string -> model class.
EVENT_REGISTRY: Final[dict[str, type[EventBase]]] = {
    str(cls.model_fields["type"].default): cls for cls in EVENT_TYPES
}

_EVENT_ADAPTER: Final[TypeAdapter[Event]] = TypeAdapter(Event, config={"defer_build": True})

_MSG_ID_SAFE: Final = re.compile(r"[^A-Za-z0-9:._/@+=-]")


class MalformedEventError(ValueError):
    """Bytes that are not a valid arcflow event; the message says why (never the payload)."""


#: Largest event accepted, in bytes (half of NATS' default 1 MiB payload limit).
MAX_EVENT_BYTES: Final = 512 * 1024
#: Deepest nesting of objects/arrays accepted; real events nest fewer than 8 levels.
MAX_EVENT_DEPTH: Final = 32
#: Integers outside a signed 64-bit range are rejected: no field needs them, and a 5,000-digit
#: number costs quadratic time to convert.
MAX_EVENT_INT: Final = 2**63


def _check_shape(raw: object) -> None:
    """Depth and integer limits, checked iteratively (a recursive walk could overflow)."""
    stack: list[tuple[object, int]] = [(raw, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_EVENT_DEPTH:
                raise MalformedEventError(f"nested deeper than {MAX_EVENT_DEPTH} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(value, int) and not -MAX_EVENT_INT <= value < MAX_EVENT_INT:
            raise MalformedEventError("integer outside the signed 64-bit range")


def parse_event(data: bytes | str) -> EventBase:
    """Decode one event from JSON bytes, choosing the model by its ``type``.

    Raises :class:`MalformedEventError` for anything that is not a current arcflow event:
    more than :data:`MAX_EVENT_BYTES`, invalid JSON, nesting deeper than
    :data:`MAX_EVENT_DEPTH`, an integer beyond 64 bits, an unknown ``type``, a
    ``schema_version`` other than the one this code understands, or a payload that does not
    match the type's schema. It never raises anything else (no ``RecursionError``, no
    ``ValueError`` from the int-conversion limit), so consumers can dead-letter on the first
    delivery. The error text names fields and reasons, not values, so it is safe to log even
    when the payload held something sensitive.
    """
    if len(data) > MAX_EVENT_BYTES:
        raise MalformedEventError(f"event of {len(data)} bytes, over {MAX_EVENT_BYTES}")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedEventError(f"not JSON: {exc.__class__.__name__} at {_pos(exc)}") from None
    except RecursionError:
        raise MalformedEventError(f"nested deeper than {MAX_EVENT_DEPTH} levels") from None
    except ValueError:  # int digits limit (sys.get_int_max_str_digits), anything json raises
        raise MalformedEventError("not JSON: a number beyond the parser's limits") from None
    if not isinstance(raw, dict):
        raise MalformedEventError(f"event must be a JSON object, got {type(raw).__name__}")
    _check_shape(raw)
    event_type = raw.get("type")
    if not isinstance(event_type, str):
        raise MalformedEventError("event has no string 'type'")
    model = EVENT_REGISTRY.get(event_type)
    if model is None:
        raise MalformedEventError(f"unknown event type {event_type[:80]!r}")
    version = raw.get("schema_version", 1)
    if version != model.SCHEMA_VERSION or isinstance(version, bool):
        # Rule (docs/events.md): a version is raised only for breaking changes, so a consumer
        # cannot guess what another version means; the message is dead-lettered, not guessed.
        raise MalformedEventError(
            f"unsupported schema_version {str(version)[:20]!r} for {event_type} "
            f"(this consumer understands {model.SCHEMA_VERSION})"
        )
    try:
        event: EventBase = _EVENT_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise MalformedEventError(f"invalid {event_type} event: {problems}") from None
    return event


def _pos(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno} column {exc.colno}"
    return "byte decoding"


def encode_event(event: EventBase) -> bytes:
    """Serialise an event to the JSON bytes that go on the wire."""
    return event.model_dump_json().encode()


def msg_id(event: EventBase) -> str:
    """The ``Nats-Msg-Id`` for an event: ``<type>:<dedup key>`` when it has one, else its id."""
    key = event.dedup_key()
    if key is None:
        return event.id
    return _MSG_ID_SAFE.sub("_", f"{event.type}:{key}")
