"""Typed errors of the Actions client and the pure mapping from an HTTP error response to them.

Callers branch on the class (a busy runner, a stale session, a gone scale set), so the mapping
from the service's .NET exception names must be exact (docs/upstream-behaviour.md#actions-errors).
Every
message is built here from status, ids and the response body only: never from request headers,
so no token can reach an exception text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from http import HTTPStatus

from arcflow.common.actions.retry import is_retryable_status

MAX_DETAIL_CHARS = 2048
REDACTED = "***"
_MIN_SECRET_LEN = 6

# Substrings of the service's `typeName` (a fully qualified .NET exception type).
AGENT_EXISTS = "AgentExistsException"
AGENT_NOT_FOUND = "AgentNotFoundException"
JOB_STILL_RUNNING = "JobStillRunningException"
SESSION_CONFLICT = "RunnerScaleSetSessionConflictException"
SCALE_SET_NOT_FOUND = "RunnerScaleSetNotFoundException"


class ActionsClientError(Exception):
    """Base of every error raised by :mod:`arcflow.common.actions`."""


class CredentialsError(ActionsClientError, ValueError):
    """Credentials are missing or malformed. The text names keys, never values."""


class InvalidResponseError(ActionsClientError):
    """The service answered with a success status but a body that breaks the protocol."""


class NilSessionError(InvalidResponseError):
    """A session create answered with the nil UUID as session id (docs/upstream-behaviour.md
    #listener-session): no session to poll or delete, refused like upstream's listener."""


class RunnerGroupNotFoundError(ActionsClientError):
    """E1 found no runner group with the requested name."""


class ActionsError(ActionsClientError):
    """An HTTP request failed: the service answered with an unexpected status, or not at all.

    ``status`` is 0 when no response was received.
    """

    def __init__(
        self,
        text: str,
        *,
        status: int = 0,
        activity_id: str = "",
        request_id: str = "",
        type_name: str = "",
        message: str = "",
        method: str = "",
        url: str = "",
    ) -> None:
        super().__init__(text)
        self.status = status
        self.activity_id = activity_id
        self.request_id = request_id
        self.type_name = type_name
        self.message = message
        self.method = method
        self.url = url

    @property
    def retryable(self) -> bool:
        """No answer, 429, or a 5xx but 501 (the Actions retry rule); read through
        :func:`arcflow.common.errors.is_retryable`."""
        return self.status == 0 or is_retryable_status(self.status)

    def is_exception(self, name: str) -> bool:
        """True when the service's exception type name contains ``name``."""
        return name in self.type_name

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, type_name={self.type_name!r}, "
            f"activity_id={self.activity_id!r}, request_id={self.request_id!r}, "
            f"text={str(self)!r})"
        )


class AmbiguousResultError(ActionsError):
    """A by-name lookup that must be unique returned several entries.

    The answer itself was a success (``status`` 200), so nothing is retried; like every
    other request error it carries the status and the response's ``ActivityId`` and
    ``X-GitHub-Request-Id`` (docs/upstream-behaviour.md#actions-errors), built by
    :func:`ambiguous_result`.
    """


class GitHubAPIError(ActionsError):
    """A request to the GitHub REST API (``{api}``, the token chain) failed."""


class RunnerExistsError(ActionsError):
    """A runner with that name already exists (``AgentExistsException``)."""


class RunnerNotFoundError(ActionsError):
    """The runner does not exist (``AgentNotFoundException``)."""


class JobStillRunningError(ActionsError):
    """The runner is busy with a job and cannot be removed yet (``JobStillRunningException``)."""


class SessionConflictError(ActionsError):
    """The scale set already has an active message session (409 on session create)."""


class ScaleSetNotFoundError(ActionsError):
    """The runner scale set does not exist (``RunnerScaleSetNotFoundException`` or 404)."""


class MessageQueueTokenExpiredError(ActionsError):
    """The message-queue token was rejected (401 on get/delete message or acquire jobs)."""


class RetriesExhaustedError(ActionsError):
    """Every attempt of a retryable request failed (5xx, 429 or transport errors)."""

    attempts: int = 0

    @property
    def retryable(self) -> bool:
        return True


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every known secret value in ``text``; the last line of defence for error bodies."""
    for secret in sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def status_text(status: int) -> str:
    """``"404 Not Found"``, the form Go prints in error texts."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _truncate(text: str) -> str:
    if len(text) <= MAX_DETAIL_CHARS:
        return text
    return text[:MAX_DETAIL_CHARS] + f"...({len(text) - MAX_DETAIL_CHARS} more chars)"


def strip_bom(body: bytes) -> bytes:
    """The service may prefix JSON with a UTF-8 byte order mark; JSON decoders reject it."""
    return body[3:] if body.startswith(b"\xef\xbb\xbf") else body


def parse_error_body(content_type: str, body: bytes) -> tuple[str, str, str]:
    """Return ``(type_name, message, detail)`` for an error response body.

    ``detail`` is the human text appended to the error: ``typeName: message`` for a JSON
    exception, the raw text for ``text/plain`` or JSON without an exception, ``unknown error``
    for an empty body.
    """
    raw = strip_bom(body).decode("utf-8", errors="replace").strip()
    if not raw:
        return "", "", "unknown error"
    if content_type.split(";")[0].strip().lower() == "text/plain":
        return "", raw, raw
    try:
        data = json.loads(raw)
    except ValueError:
        return "", raw, f"failed to unmarshal error response body: {raw!r}"
    if not isinstance(data, dict):
        return "", raw, raw
    type_name = data.get("typeName") or data.get("TypeName") or ""
    message = data.get("message") or data.get("Message") or ""
    type_name = type_name if isinstance(type_name, str) else str(type_name)
    message = message if isinstance(message, str) else str(message)
    if type_name:
        return type_name, message, f"{type_name}: {message}"
    return "", message or raw, message or raw


def error_class_for(type_name: str) -> type[ActionsError] | None:
    """Map the service's exception type name to a typed error
    (docs/upstream-behaviour.md#actions-errors)."""
    if AGENT_EXISTS in type_name:
        return RunnerExistsError
    if AGENT_NOT_FOUND in type_name:
        return RunnerNotFoundError
    if JOB_STILL_RUNNING in type_name:
        return JobStillRunningError
    if SESSION_CONFLICT in type_name:
        return SessionConflictError
    if SCALE_SET_NOT_FOUND in type_name:
        return ScaleSetNotFoundError
    return None


def error_from_response(
    *,
    method: str,
    url: str,
    status: int,
    content_type: str,
    body: bytes,
    activity_id: str = "",
    request_id: str = "",
    github_api: bool = False,
    status_overrides: dict[int, type[ActionsError]] | None = None,
    prefix: str = "",
    secrets: Iterable[str] = (),
) -> ActionsError:
    """Build the typed error for an unexpected response.

    Precedence: a mapped ``typeName`` wins; then ``status_overrides`` (per-endpoint meanings such
    as 409 on session create); then :class:`GitHubAPIError` for ``{api}`` calls; else
    :class:`ActionsError`. ``secrets`` are scrubbed out of everything taken from the body.
    """
    secret_list = list(secrets)
    type_name, message, detail = parse_error_body(content_type, body)
    message = _truncate(redact(message, secret_list))
    detail = _truncate(redact(detail, secret_list))
    cls: type[ActionsError] | None = error_class_for(type_name)
    if cls is None and status_overrides:
        cls = status_overrides.get(status)
    if cls is None:
        cls = GitHubAPIError if github_api else ActionsError
    lead = f"{prefix}: " if prefix else ""
    text = (
        f'{lead}request {method} {url} failed(status="{status_text(status)}", '
        f'activity_id="{activity_id}", github_request_id="{request_id}"): {detail}'
    )
    return cls(
        text,
        status=status,
        activity_id=activity_id,
        request_id=request_id,
        type_name=type_name,
        message=message,
        method=method,
        url=url,
    )


def ambiguous_result(
    *, method: str, url: str, status: int, activity_id: str, request_id: str, detail: str
) -> AmbiguousResultError:
    """The error for a by-name lookup that found several entries, in the form of every other
    request error: ``request GET <url> failed(status=..., activity_id=..., ...): <detail>``."""
    text = (
        f'request {method} {url} failed(status="{status_text(status)}", '
        f'activity_id="{activity_id}", github_request_id="{request_id}"): {detail}'
    )
    return AmbiguousResultError(
        text,
        status=status,
        activity_id=activity_id,
        request_id=request_id,
        message=detail,
        method=method,
        url=url,
    )
