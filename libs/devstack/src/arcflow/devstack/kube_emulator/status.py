"""The API server's error answers, as :class:`ApiStatus` exceptions the HTTP layer translates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arcflow.common.kube.resources import Resource
from arcflow.devstack.kube_emulator.objects import Obj


class ApiStatus(Exception):  # noqa: N818 - it is the API's Status object
    """An error the API server answers with a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def body(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def status_details(resource: Resource, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    if name:
        details["name"] = name
    return details


def not_found(resource: Resource, name: str) -> ApiStatus:
    return ApiStatus(
        404,
        "NotFound",
        f'{resource.qualified_plural} "{name}" not found',
        status_details(resource, name),
    )


def conflict(resource: Resource, name: str, why: str) -> ApiStatus:
    return ApiStatus(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified_plural} "{name}": {why}',
        status_details(resource, name),
    )


def invalid(resource: Resource, name: str, causes: list[tuple[str, str]]) -> ApiStatus:
    summary = ", ".join(f"{fld}: {msg}" for fld, msg in causes)
    details = status_details(resource, name)
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": msg, "field": fld} for fld, msg in causes
    ]
    return ApiStatus(422, "Invalid", f'{resource.kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiStatus:
    return ApiStatus(400, "BadRequest", message)


def expired(requested: int, oldest: int) -> ApiStatus:
    return ApiStatus(410, "Expired", f"too old resource version: {requested} ({oldest})")
