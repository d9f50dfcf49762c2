"""HTTP plumbing shared by the service routes and the control routes."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from arcflow.devstack.actions_sim.model import ServiceError, TypeNames

DOCS_URL = "https://docs.github.com/rest"


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(data, separators=(",", ":")).encode(),
        content_type="application/json",
        charset="utf-8",
    )


def empty_response(status: int) -> web.Response:
    return web.Response(status=status)


def service_error_response(error: ServiceError) -> web.Response:
    return json_response({"typeName": error.type_name, "message": error.message}, error.status)


def github_error_response(status: int, message: str) -> web.Response:
    return json_response({"message": message, "documentation_url": DOCS_URL}, status)


def query_value(request: web.Request, key: str) -> str | None:
    """Query parameters by case-insensitive name, already URL-decoded, in any position."""
    wanted = key.lower()
    for name, value in request.query.items():
        if name.lower() == wanted:
            return value
    return None


def query_int(request: web.Request, key: str, default: int) -> int:
    raw = query_value(request, key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ServiceError(400, TypeNames.ARGUMENT, f"{key} must be an integer") from None


def bearer_token(request: web.Request, scheme: str = "bearer") -> str | None:
    """The credential after ``scheme`` in Authorization (``token`` is accepted for Bearer)."""
    raw = request.headers.get("Authorization", "")
    kind, _, value = raw.partition(" ")
    accepted = {scheme} | ({"token"} if scheme == "bearer" else set())
    if kind.lower() in accepted and value.strip():
        return value.strip()
    return None


def github_credential(request: web.Request) -> str | None:
    """The credential of a GitHub REST call: a ``Bearer``/``token`` value, or the password of
    HTTP ``Basic`` auth (GitHub takes a token as the password, with any user name;
    docs/upstream-behaviour.md#github-rest-takes-a-token-over-basic-auth)."""
    token = bearer_token(request)
    if token is not None:
        return token
    kind, _, value = request.headers.get("Authorization", "").partition(" ")
    if kind.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    _user, sep, password = decoded.partition(":")
    return password if sep and password else None


async def read_json(request: web.Request, *, allow_empty: bool = False) -> Any:
    """The request body as JSON; a clear 400 for anything else."""
    raw = await request.read()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        if allow_empty:
            return None
        raise ServiceError(400, TypeNames.ARGUMENT, "a JSON request body is required")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ServiceError(400, TypeNames.ARGUMENT, "the request body is not valid JSON") from None


def control_error(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status)


def as_mapping(data: Any) -> Mapping[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError("the request body must be a JSON object")
    return data
