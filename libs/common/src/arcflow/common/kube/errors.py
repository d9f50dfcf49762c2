"""Typed errors for Kubernetes API failures.

Callers branch on what happened (missing, conflict, forbidden, invalid, expired watch) rather
than on HTTP codes. Messages carry the API server's ``Status`` message, never a request body,
so a Secret's data cannot leak through an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arcflow.common.errors import TerminalError


class KubeApiError(Exception):
    """Any failure talking to the API server; ``status`` is the HTTP code (0: no response)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details: dict[str, Any] = dict(details or {})

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status}, reason={self.reason!r}, "
            f"message={self.message!r})"
        )


class KubeConnectionError(KubeApiError):
    """The API server could not be reached or the connection broke mid-request."""


class NotFoundError(KubeApiError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class ConflictError(KubeApiError):
    """409: either the name is taken (``already_exists``) or the write was stale."""

    @property
    def already_exists(self) -> bool:
        """True for a create that hit an existing name; False for a stale resourceVersion."""
        return self.reason == "AlreadyExists"


class ForbiddenError(KubeApiError):
    """403: RBAC denied the request (or the namespace is terminating)."""


class InvalidError(KubeApiError, TerminalError):
    """422: the object failed validation; ``causes`` lists the field errors."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        causes = self.details.get("causes", [])
        return list(causes) if isinstance(causes, list) else []


class ResourceVersionExpired(KubeApiError):  # noqa: N818 - named after the API condition
    """410 Gone: the resourceVersion is older than the server's history; re-list."""


_BY_STATUS: dict[int, type[KubeApiError]] = {
    404: NotFoundError,
    409: ConflictError,
    403: ForbiddenError,
    422: InvalidError,
    410: ResourceVersionExpired,
}


def error_from_status(http_status: int, body: Any) -> KubeApiError:
    """Build the typed error for an HTTP status and a (possibly non-Status) response body."""
    status_body: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = status_body.get("code")
    status = code if isinstance(code, int) and code >= 400 else http_status
    reason = str(status_body.get("reason") or "")
    message = str(status_body.get("message") or f"HTTP {status}")
    details = status_body.get("details")
    cls = _BY_STATUS.get(status, KubeApiError)
    if reason == "Expired" or reason == "Gone":
        cls = ResourceVersionExpired
    return cls(
        message,
        status=status,
        reason=reason,
        details=details if isinstance(details, Mapping) else None,
    )
