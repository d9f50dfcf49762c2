"""The registrar's request/reply wire contract: typed requests, replies, errors and a client.

Transport is core NATS request/reply on ``arc.rpc.registrar.<op>``, never JetStream: a JIT
config is a runner credential and must not be persisted anywhere but the runner's Secret.
Replies are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {"code", "reason"}}``.

It lives in ``arcflow.common`` because two services speak it (the registrar serves it, the
reconciler calls it; so does ``arcflow doctor``) and services may not import each other: one
definition cannot drift. Which operations the registrar serves is declared once, in its
spec's ``rpc`` (ADR 0081).
It imports only pydantic, nats-py and ``arcflow.common``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Generic, Literal, TypeVar

import nats.errors
from nats.aio.client import Client as NatsClient
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
    model_validator,
)

from arcflow.common.subjects import (
    RPC_REGISTRAR_GET_RUNNER,
    RPC_REGISTRAR_JITCONFIG,
    RPC_REGISTRAR_LIST_RUNNERS,
    RPC_REGISTRAR_REMOVE_RUNNER,
    RPC_REGISTRAR_SCALE_SETS,
)

JITCONFIG_SUBJECT: Final = RPC_REGISTRAR_JITCONFIG
REMOVE_RUNNER_SUBJECT: Final = RPC_REGISTRAR_REMOVE_RUNNER
GET_RUNNER_SUBJECT: Final = RPC_REGISTRAR_GET_RUNNER
SCALE_SETS_SUBJECT: Final = RPC_REGISTRAR_SCALE_SETS
LIST_RUNNERS_SUBJECT: Final = RPC_REGISTRAR_LIST_RUNNERS
#: Queue group of the registrar replicas: each request is answered by exactly one of them.
RPC_QUEUE_GROUP: Final = "registrar"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RpcErrorCode(StrEnum):
    RUNNER_EXISTS = "runner_exists"
    """A runner with that name is already registered (JIT config only)."""
    NOT_FOUND = "not_found"
    """The ARS, its registration, or the scale set is unknown."""
    INVALID_REQUEST = "invalid_request"
    """The request does not parse or names something that does not belong together."""
    CREDENTIALS = "credentials_error"
    """The ARS's credentials Secret is missing or malformed."""
    UPSTREAM_ERROR = "upstream_error"
    """The Actions service failed (retries exhausted, unexpected status, bad response)."""
    INTERNAL = "internal"


class RpcError(_Model):
    code: RpcErrorCode
    reason: str


# --- requests and results -------------------------------------------------------------------


#: Largest request accepted, in bytes: real ones are under 1 KiB (docs/registrar.md, "Bad
#: requests"); anything bigger is refused before it is parsed.
MAX_REQUEST_BYTES: Final = 64 * 1024
_DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class _ArsScoped(_Model):
    # Strict: a request says what it means ("12" or true is not a runner id).
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    namespace: str = Field(min_length=1, max_length=63, pattern=_DNS_LABEL)
    ars: str = Field(
        min_length=1,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="AutoscalingRunnerSet name",
    )
    budget_seconds: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="How long the caller waits for the reply: the registrar answers within it, "
        "giving up retries that would not fit (ADR 0044); absent: no limit of the caller's",
    )


class JitConfigRequest(_ArsScoped):
    scale_set_id: int = Field(gt=0, lt=2**63)
    runner_name: str = Field(min_length=1, max_length=253)
    work_folder: str = Field(default="", max_length=4096)


class JitConfigResult(_Model):
    runner_id: int
    runner_name: str
    scale_set_id: int
    encoded_jit_config: SecretStr = Field(description="Runner credential: reply only, never logged")

    @field_serializer("encoded_jit_config", when_used="json")
    def _reveal_on_the_wire(self, value: SecretStr) -> str:
        """JSON is the reply payload, the only place the value travels; reprs stay masked."""
        return value.get_secret_value()


class RemoveRunnerRequest(_ArsScoped):
    runner_id: int = Field(gt=0, lt=2**63)


RemoveOutcome = Literal["ok", "job_still_running", "not_found"]


class RemoveRunnerResult(_Model):
    outcome: RemoveOutcome


class GetRunnerRequest(_ArsScoped):
    runner_name: str = Field(min_length=1, max_length=253)


class RunnerInfo(_Model):
    id: int
    name: str
    runner_scale_set_id: int = 0


class GetRunnerResult(_Model):
    runner: RunnerInfo | None = None
    """``None``: no runner with that name is registered."""


class ScaleSetsRequest(_ArsScoped):
    """GitHub's view of every scale set registered for the ARS (``arcflow doctor``)."""


class ScaleSetView(_Model):
    """One registered scale set as GitHub has it (``exists`` False: GitHub answered 404)."""

    variant: str
    scale_set_id: int
    name: str
    exists: bool
    assigned_jobs: int = 0
    running_jobs: int = 0
    registered_runners: int = 0
    busy_runners: int = 0
    idle_runners: int = 0


class ScaleSetsResult(_Model):
    scale_sets: list[ScaleSetView] = Field(default_factory=list)


#: Most scale sets one ``list-runners`` request may name (an ARS's variants, with room).
MAX_LISTED_SCALE_SETS: Final = 1000


class ListRunnersRequest(_ArsScoped):
    """The runners of some scale sets of one ARS: ``scale_set_ids`` (one listing on GitHub
    answers them all), or the one ``scale_set_id`` of callers from before it."""

    scale_set_ids: list[int] = Field(default_factory=list, max_length=MAX_LISTED_SCALE_SETS)
    scale_set_id: int | None = Field(default=None, gt=0, lt=2**63)

    @model_validator(mode="after")
    def _one_way_to_name_them(self) -> ListRunnersRequest:
        if self.scale_set_ids and self.scale_set_id is not None:
            raise ValueError("give scale_set_ids or scale_set_id, not both")
        if not self.scale_set_ids and self.scale_set_id is None:
            raise ValueError("scale_set_ids or scale_set_id is required")
        if any(not 0 < i < 2**63 for i in self.scale_set_ids):
            raise ValueError("scale_set_ids must be positive 63-bit integers")
        return self

    @property
    def wanted(self) -> frozenset[int]:
        return frozenset(self.scale_set_ids or (self.scale_set_id or 0,))


class ListRunnersResult(_Model):
    runners: list[RunnerInfo] = Field(default_factory=list)
    """The runners GitHub has registered in those scale sets (busy or not), each with its
    ``runner_scale_set_id``."""


ResultT = TypeVar("ResultT", bound=BaseModel)


class RpcReply(BaseModel, Generic[ResultT]):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    result: ResultT | None = None
    error: RpcError | None = None

    @classmethod
    def success(cls, result: ResultT) -> RpcReply[ResultT]:
        return cls(ok=True, result=result)

    @classmethod
    def failure(cls, code: RpcErrorCode, reason: str) -> RpcReply[ResultT]:
        return cls(ok=False, error=RpcError(code=code, reason=reason))

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()


# --- errors the client raises -----------------------------------------------------------------


class RegistrarRpcError(Exception):
    """The registrar answered with an error, or did not answer."""

    code: RpcErrorCode = RpcErrorCode.INTERNAL

    def __init__(self, reason: str, code: RpcErrorCode | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if code is not None:
            self.code = code


class RunnerExistsRpcError(RegistrarRpcError):
    code = RpcErrorCode.RUNNER_EXISTS


class NotFoundRpcError(RegistrarRpcError):
    code = RpcErrorCode.NOT_FOUND


class InvalidRequestRpcError(RegistrarRpcError):
    code = RpcErrorCode.INVALID_REQUEST


class CredentialsRpcError(RegistrarRpcError):
    code = RpcErrorCode.CREDENTIALS


class UpstreamRpcError(RegistrarRpcError):
    code = RpcErrorCode.UPSTREAM_ERROR


class RegistrarUnavailableError(RegistrarRpcError):
    """No registrar answered in time (none running, or it is overloaded): retry later."""

    code = RpcErrorCode.INTERNAL


_ERRORS: Final[dict[RpcErrorCode, type[RegistrarRpcError]]] = {
    RpcErrorCode.RUNNER_EXISTS: RunnerExistsRpcError,
    RpcErrorCode.NOT_FOUND: NotFoundRpcError,
    RpcErrorCode.INVALID_REQUEST: InvalidRequestRpcError,
    RpcErrorCode.CREDENTIALS: CredentialsRpcError,
    RpcErrorCode.UPSTREAM_ERROR: UpstreamRpcError,
}


def error_for(error: RpcError) -> RegistrarRpcError:
    return _ERRORS.get(error.code, RegistrarRpcError)(error.reason, error.code)


# --- client -----------------------------------------------------------------------------------


#: Share of the caller's timeout the registrar may spend: the rest carries the reply back.
BUDGET_SHARE: Final = 0.8


class RegistrarRpcClient:
    """Typed calls to the registrar over core NATS request/reply (used by the reconciler).

    Every request carries ``budget_seconds`` (80 % of ``timeout``): the registrar answers
    within it, a failure included, so a caller is never left waiting out its timeout while
    the registrar still retries GitHub (ADR 0044)."""

    def __init__(self, nc: NatsClient, *, timeout: float = 10.0) -> None:
        self._nc = nc
        self.timeout = timeout

    async def _call(self, subject: str, request: _ArsScoped, result_type: type[ResultT]) -> ResultT:
        budget = min(self.timeout * BUDGET_SHARE, 600.0)
        budgeted = request.model_copy(update={"budget_seconds": budget})
        try:
            message = await self._nc.request(
                subject, budgeted.model_dump_json().encode(), timeout=self.timeout
            )
        except nats.errors.NoRespondersError:
            raise RegistrarUnavailableError(f"no registrar is serving {subject}") from None
        except nats.errors.TimeoutError:
            raise RegistrarUnavailableError(
                f"no reply on {subject} within {self.timeout:g}s"
            ) from None
        try:
            reply = RpcReply[result_type].model_validate_json(message.data)  # type: ignore[valid-type]
        except ValidationError as exc:
            raise RegistrarRpcError(
                f"malformed reply on {subject}: {exc.error_count()} validation error(s)"
            ) from None
        if not reply.ok or reply.result is None:
            if reply.error is None:
                raise RegistrarRpcError(f"reply on {subject} has neither result nor error")
            raise error_for(reply.error)
        result: ResultT = reply.result
        return result

    async def generate_jit_config(
        self,
        namespace: str,
        ars: str,
        scale_set_id: int,
        runner_name: str,
        work_folder: str = "",
    ) -> JitConfigResult:
        """Register a just-in-time runner; raises :class:`RunnerExistsRpcError` on a name clash."""
        request = JitConfigRequest(
            namespace=namespace,
            ars=ars,
            scale_set_id=scale_set_id,
            runner_name=runner_name,
            work_folder=work_folder,
        )
        return await self._call(JITCONFIG_SUBJECT, request, JitConfigResult)

    async def remove_runner(self, namespace: str, ars: str, runner_id: int) -> RemoveOutcome:
        """Remove a runner: ``ok``, ``job_still_running`` (skip, retry later) or ``not_found``."""
        request = RemoveRunnerRequest(namespace=namespace, ars=ars, runner_id=runner_id)
        result = await self._call(REMOVE_RUNNER_SUBJECT, request, RemoveRunnerResult)
        return result.outcome

    async def list_runners(
        self, namespace: str, ars: str, scale_set_ids: list[int]
    ) -> list[RunnerInfo]:
        """The runners registered in these scale sets of the ARS, from one listing on GitHub
        (the orphan scan, ADR 0065, ADR 0121)."""
        request = ListRunnersRequest(namespace=namespace, ars=ars, scale_set_ids=scale_set_ids)
        result = await self._call(LIST_RUNNERS_SUBJECT, request, ListRunnersResult)
        return list(result.runners)

    async def get_runner(self, namespace: str, ars: str, runner_name: str) -> RunnerInfo | None:
        """The registered runner with that name, or ``None``."""
        request = GetRunnerRequest(namespace=namespace, ars=ars, runner_name=runner_name)
        result = await self._call(GET_RUNNER_SUBJECT, request, GetRunnerResult)
        return result.runner

    async def scale_sets(self, namespace: str, ars: str) -> list[ScaleSetView]:
        """GitHub's view of the ARS's registered scale sets (one GET per scale set)."""
        request = ScaleSetsRequest(namespace=namespace, ars=ars)
        result = await self._call(SCALE_SETS_SUBJECT, request, ScaleSetsResult)
        return list(result.scale_sets)


def parse_request(model: type[_ArsScoped], data: bytes) -> _ArsScoped:
    """Parse a request; raises ``ValueError`` with field names (never values). Oversized,
    non-JSON, too deep (the parser's recursion limit), out-of-range or wrong-typed input all
    end here, never in another exception."""
    if len(data) > MAX_REQUEST_BYTES:
        raise ValueError(
            f"invalid {model.__name__}: request of {len(data)} bytes, over {MAX_REQUEST_BYTES}"
        )
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise ValueError(f"invalid {model.__name__}: {problems}") from None


__all__ = [
    "BUDGET_SHARE",
    "GET_RUNNER_SUBJECT",
    "JITCONFIG_SUBJECT",
    "LIST_RUNNERS_SUBJECT",
    "MAX_REQUEST_BYTES",
    "REMOVE_RUNNER_SUBJECT",
    "RPC_QUEUE_GROUP",
    "SCALE_SETS_SUBJECT",
    "CredentialsRpcError",
    "GetRunnerRequest",
    "GetRunnerResult",
    "InvalidRequestRpcError",
    "JitConfigRequest",
    "JitConfigResult",
    "ListRunnersRequest",
    "ListRunnersResult",
    "NotFoundRpcError",
    "RegistrarRpcClient",
    "RegistrarRpcError",
    "RegistrarUnavailableError",
    "RemoveOutcome",
    "RemoveRunnerRequest",
    "RemoveRunnerResult",
    "RpcError",
    "RpcErrorCode",
    "RpcReply",
    "RunnerExistsRpcError",
    "RunnerInfo",
    "ScaleSetView",
    "ScaleSetsRequest",
    "ScaleSetsResult",
    "UpstreamRpcError",
    "error_for",
    "parse_request",
]
