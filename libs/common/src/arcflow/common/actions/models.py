"""Wire types of the Actions scale-set service (docs/upstream-behaviour.md#actions-endpoints,
#actions-messages).

Decoding is lenient the way the upstream Go client is: unknown keys are ignored, missing keys
and ``null`` take defaults, and key names match case-insensitively. Secret fields (the message
queue token, the JIT config) are ``SecretStr`` so no repr or log line shows them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from arcflow.common.actions.errors import InvalidResponseError, strip_bom

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
"""Go's zero ``time.Time``; the service and the Go client use it for "not set"."""

JOB_MESSAGES_TYPE = "RunnerScaleSetJobMessages"
DEFAULT_LABEL_TYPE = "System"


def format_rfc3339(value: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix, as Go marshals ``time.Time``."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
        f"T{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


class WireModel(BaseModel):
    """Base: camelCase aliases, ignore unknown keys, ``null`` means "use the default"."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=False,
        defer_build=True,
    )
    _aliases_by_lower: ClassVar[dict[str, str]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._aliases_by_lower = {
            (field.alias or name).lower(): field.alias or name
            for name, field in cls.model_fields.items()
        }

    @model_validator(mode="before")
    @classmethod
    def _normalize_keys(cls, data: Any) -> Any:
        """Drop ``null`` values and map keys case-insensitively onto the declared aliases."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            if value is None:
                continue
            if isinstance(key, str):
                key = cls._aliases_by_lower.get(key.lower(), key)
            out.setdefault(key, value)
        return out


M = TypeVar("M", bound=BaseModel)


def validate_wire(model: type[M], data: Any, what: str) -> M:
    """``model.model_validate`` whose error names fields and reasons but never input values.

    pydantic's own message quotes the offending input, which may be a token.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise InvalidResponseError(f"{what} is malformed: {reasons}") from None


class Label(WireModel):
    type: str = ""
    name: str = ""


class RunnerSetting(WireModel):
    disable_update: bool = False


class RunnerScaleSetStatistic(WireModel):
    total_available_jobs: int = 0
    total_acquired_jobs: int = 0
    total_assigned_jobs: int = 0
    total_running_jobs: int = 0
    total_registered_runners: int = 0
    total_busy_runners: int = 0
    total_idle_runners: int = 0


class RunnerGroup(WireModel):
    id: int = 0
    name: str = ""
    size: int = 0
    is_default_group: bool = False


class RunnerScaleSet(WireModel):
    id: int = 0
    name: str = ""
    runner_group_id: int = 0
    runner_group_name: str = ""
    labels: list[Label] = Field(default_factory=list)
    runner_setting: RunnerSetting = Field(default_factory=RunnerSetting, alias="RunnerSetting")
    created_on: datetime = ZERO_TIME
    runner_jit_config_url: str = ""
    statistics: RunnerScaleSetStatistic | None = None

    def to_request_body(self) -> dict[str, Any]:
        """The create/update body as Go's ``omitempty`` shapes it.

        Empty scalars, lists and ``statistics`` are left out, but ``RunnerSetting`` and
        ``createdOn`` (a struct and a time) are always present, so the service sees exactly
        what the upstream client sends.
        """
        body: dict[str, Any] = {}
        if self.id:
            body["id"] = self.id
        if self.name:
            body["name"] = self.name
        if self.runner_group_id:
            body["runnerGroupId"] = self.runner_group_id
        if self.runner_group_name:
            body["runnerGroupName"] = self.runner_group_name
        if self.labels:
            body["labels"] = [{"type": lb.type, "name": lb.name} for lb in self.labels]
        body["RunnerSetting"] = {"disableUpdate": self.runner_setting.disable_update}
        body["createdOn"] = format_rfc3339(self.created_on)
        if self.runner_jit_config_url:
            body["runnerJitConfigUrl"] = self.runner_jit_config_url
        if self.statistics is not None:
            body["statistics"] = self.statistics.model_dump(by_alias=True)
        return body


def with_default_label_types(labels: list[Label]) -> list[Label]:
    """Every label without a type becomes a ``System`` label (E4 and E5)."""
    return [lb if lb.type else Label(type=DEFAULT_LABEL_TYPE, name=lb.name) for lb in labels]


def ensure_scale_set_labels(scale_set: RunnerScaleSet) -> RunnerScaleSet:
    """Client-side label defaulting before E4 (docs/upstream-behaviour.md#actions-endpoints).

    No labels: the scale set's name becomes its only label. No labels and no name: a clear error,
    raised before any request is sent.
    """
    labels = list(scale_set.labels)
    if not labels:
        if not scale_set.name:
            raise ValueError("runner scale set needs a name or at least one label")
        labels = [Label(type=DEFAULT_LABEL_TYPE, name=scale_set.name)]
    return scale_set.model_copy(update={"labels": with_default_label_types(labels)})


class RunnerReference(WireModel):
    id: int = 0
    name: str = ""
    runner_scale_set_id: int = 0


class JitRunnerConfig(WireModel):
    """E14 result. ``encoded_jit_config`` is a runner credential: keep it a ``SecretStr``."""

    runner: RunnerReference = Field(default_factory=RunnerReference)
    encoded_jit_config: SecretStr = Field(default=SecretStr(""), alias="encodedJITConfig")


class MessageSession(WireModel):
    """E7/E8 result. ``message_queue_access_token`` authorizes E10-E12; never log it."""

    session_id: str = ""
    owner_name: str = ""
    runner_scale_set: RunnerScaleSet | None = None
    message_queue_url: str = ""
    message_queue_access_token: SecretStr = SecretStr("")
    statistics: RunnerScaleSetStatistic | None = None


class JobMessageBase(WireModel):
    message_type: str = ""
    runner_request_id: int = 0
    repository_name: str = ""
    owner_name: str = ""
    job_id: str = ""
    job_workflow_ref: str = ""
    job_display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    request_labels: list[str] = Field(default_factory=list)
    queue_time: datetime = ZERO_TIME
    scale_set_assign_time: datetime = ZERO_TIME
    runner_assign_time: datetime = ZERO_TIME
    finish_time: datetime = ZERO_TIME


class JobAvailable(JobMessageBase):
    message_type: Literal["JobAvailable"] = "JobAvailable"
    acquire_job_url: str = ""


class JobAssigned(JobMessageBase):
    message_type: Literal["JobAssigned"] = "JobAssigned"


class JobStarted(JobMessageBase):
    message_type: Literal["JobStarted"] = "JobStarted"
    runner_id: int = 0
    runner_name: str = ""


class JobCompleted(JobMessageBase):
    message_type: Literal["JobCompleted"] = "JobCompleted"
    runner_id: int = 0
    runner_name: str = ""
    result: str = ""


JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted

_JOB_TYPES: dict[str, type[JobAvailable | JobAssigned | JobStarted | JobCompleted]] = {
    "JobAvailable": JobAvailable,
    "JobAssigned": JobAssigned,
    "JobStarted": JobStarted,
    "JobCompleted": JobCompleted,
}


def parse_job_messages(body: str) -> list[JobMessage]:
    """Parse the envelope's ``body``: a JSON string holding an array of job messages.

    An empty string or ``null`` means no messages. Elements of an unknown ``messageType`` are
    skipped, as upstream does, so the service can add types without breaking listeners.
    """
    text = body.lstrip("\ufeff").strip()
    if not text:
        return []
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidResponseError(f"message body is not valid JSON: {exc.msg}") from None
    if items is None:
        return []
    if not isinstance(items, list):
        raise InvalidResponseError(f"message body must be a JSON array, got {type(items).__name__}")
    parsed: list[JobMessage] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidResponseError(f"job message {index} is not a JSON object")
        cls = _JOB_TYPES.get(str(item.get("messageType", "")))
        if cls is None:
            continue
        item = {k: v for k, v in item.items() if str(k).lower() != "messagetype"}
        parsed.append(validate_wire(cls, item, f"job message {index}"))
    return parsed


class RunnerScaleSetMessage(WireModel):
    """E10 result: the envelope plus its job messages, parsed once."""

    message_id: int = 0
    message_type: str = ""
    body: str = ""
    statistics: RunnerScaleSetStatistic | None = None
    job_messages: list[JobMessage] = Field(default_factory=list, exclude=True)

    @property
    def jobs_available(self) -> list[JobAvailable]:
        return [m for m in self.job_messages if isinstance(m, JobAvailable)]

    @property
    def jobs_assigned(self) -> list[JobAssigned]:
        return [m for m in self.job_messages if isinstance(m, JobAssigned)]

    @property
    def jobs_started(self) -> list[JobStarted]:
        return [m for m in self.job_messages if isinstance(m, JobStarted)]

    @property
    def jobs_completed(self) -> list[JobCompleted]:
        return [m for m in self.job_messages if isinstance(m, JobCompleted)]


def parse_runner_scale_set_message(payload: bytes | str) -> RunnerScaleSetMessage:
    """Decode an E10 200 response body (BOM tolerated) into a message with parsed job messages.

    An empty body is an error (the real service has sent 200 with no body), as is a
    ``messageType`` other than ``RunnerScaleSetJobMessages`` or a ``body`` that is not a string.
    """
    raw = strip_bom(payload.encode() if isinstance(payload, str) else payload).strip()
    if not raw:
        raise InvalidResponseError("message response has an empty body")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidResponseError(f"message response is not valid JSON: {exc.msg}") from None
    except UnicodeDecodeError:
        raise InvalidResponseError("message response is not UTF-8") from None
    if not isinstance(data, dict):
        raise InvalidResponseError("message response is not a JSON object")
    data = {k: v for k, v in data.items() if str(k).lower() != "jobmessages"}
    body = next((v for k, v in data.items() if str(k).lower() == "body"), None)
    if body is not None and not isinstance(body, str):
        raise InvalidResponseError(
            f"message body must be a JSON string holding an array, got {type(body).__name__}"
        )
    message = validate_wire(RunnerScaleSetMessage, data, "message response")
    if message.message_type != JOB_MESSAGES_TYPE:
        raise InvalidResponseError(f"unsupported message type: {message.message_type!r}")
    message.job_messages = parse_job_messages(message.body)
    return message


def decode_json(payload: bytes) -> Any:
    """``json.loads`` after stripping a UTF-8 BOM; errors never quote the body (may be secret)."""
    raw = strip_bom(payload)
    if not raw.strip():
        raise InvalidResponseError("response body is empty")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidResponseError(
            f"response body is not valid JSON ({len(raw)} bytes, {exc.msg} at {exc.pos})"
        ) from None
    except UnicodeDecodeError:
        raise InvalidResponseError(f"response body is not UTF-8 ({len(raw)} bytes)") from None
