"""A small real HTTP server for the Actions client's HTTP tests.

It serves the GitHub side of the token chain (GHES layout, ``/api/v3``) and routes every
``{svc}`` / ``{mq}`` request to handlers each test installs, recording every request. It is a
real aiohttp server on 127.0.0.1 reached over real HTTP; the full stateful simulator
(``arcflow.devstack.actions_sim``) is exercised by the contract tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from arcflow.common.actions import ActionsClient, PatCredentials, RetryPolicy

PAT = "ghp_PAT_SECRET_VALUE_0123456789"
REGISTRATION_TOKEN = "REG_SECRET_TOKEN_abcdef012345"
INSTALLATION_TOKEN = "ghs_INSTALLATION_SECRET_987654"
MQ_TOKEN_PREFIX = "MQ_SECRET_TOKEN_"
JIT_CONFIG = "JIT_SECRET_CONFIG_eyJydW5uZXIiOiJzZWNyZXQifQ=="
ORG = "example-org"
TENANT = "/tenant/1/"
ADMIN_SIGNING_KEY = "test-admin-signing-key-of-32-bytes!!"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    raw_query: str = ""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeGitHub:
    """State of the test server; tests tweak it and read ``requests``."""

    base_url: str = ""
    admin_ttl: float = 3600.0
    admin_tokens: list[str] = field(default_factory=list)
    registration_statuses: list[int] = field(default_factory=list)
    registration_token_statuses: list[int] = field(default_factory=list)
    app_public_key: Any = None
    handlers: dict[tuple[str, str], Handler] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)

    @property
    def config_url(self) -> str:
        return f"{self.base_url}/{ORG}"

    @property
    def service_url(self) -> str:
        return f"{self.base_url}{TENANT}"

    def on(self, method: str, path: str, handler: Handler) -> None:
        """Install a handler for ``{svc}``-relative ``path`` (or an absolute path from ``/``)."""
        key = path if path.startswith("/") else TENANT + path
        self.handlers[(method, key)] = handler

    def to(self, method: str, path: str) -> list[Recorded]:
        key = path if path.startswith("/") else TENANT + path
        return [r for r in self.requests if r.method == method and r.path == key]

    def issue_admin_token(self) -> str:
        now = int(time.time())
        token = jwt.encode(
            {
                "iat": now - 10,
                "exp": now + int(self.admin_ttl),
                "iss": "sim",
                "n": len(self.admin_tokens),
            },
            ADMIN_SIGNING_KEY,
            algorithm="HS256",
        )
        self.admin_tokens.append(token)
        return token

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Recorded(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=dict(request.headers),
                body=body,
                raw_query=request.raw_path.partition("?")[2],
            )
        )
        path = request.path
        handler = self.handlers.get((request.method, path))
        if handler is not None:  # a test's own handler wins, also over the token chain
            return await handler(request)
        if (
            request.method == "POST"
            and path == f"/api/v3/orgs/{ORG}/actions/runners/registration-token"
        ):
            if self.registration_token_statuses:
                status = self.registration_token_statuses.pop(0)
                return web.json_response({"message": "registration token refused"}, status=status)
            return web.json_response({"token": REGISTRATION_TOKEN}, status=201)
        if request.method == "POST" and path.startswith("/api/v3/app/installations/"):
            auth = request.headers.get("Authorization", "")
            try:
                claims = jwt.decode(
                    auth.removeprefix("Bearer "), self.app_public_key, algorithms=["RS256"]
                )
            except jwt.PyJWTError:
                return web.json_response({"message": "Bad credentials"}, status=401)
            assert claims["iss"]
            return web.json_response(
                {"token": INSTALLATION_TOKEN, "expires_at": "2099-01-01T00:00:00Z"}, status=201
            )
        if request.method == "POST" and path == "/api/v3/actions/runner-registration":
            if self.registration_statuses:
                status = self.registration_statuses.pop(0)
                return web.json_response({"message": "not yet"}, status=status)
            if request.headers.get("Authorization") != f"RemoteAuth {REGISTRATION_TOKEN}":
                return web.json_response({"message": "bad remote auth"}, status=401)
            return web.json_response(
                {"url": self.service_url, "token": self.issue_admin_token()}, status=201
            )
        return web.json_response(
            {"typeName": "NotFoundException", "message": f"no route {request.method} {path}"},
            status=404,
        )


def sequence(*responses: Callable[[], web.StreamResponse]) -> Handler:
    """A handler answering with each factory in turn, then repeating the last one."""
    remaining = list(responses)

    async def handler(_request: web.Request) -> web.StreamResponse:
        factory = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        return factory()

    return handler


def status(
    code: int, body: Any = None, headers: dict[str, str] | None = None
) -> Callable[[], web.StreamResponse]:
    """Factory of a JSON (or empty) response."""

    def make() -> web.StreamResponse:
        if body is None:
            return web.Response(status=code, headers=headers)
        return web.json_response(body, status=code, headers=headers)

    return make


def session_body(n: int = 0, mq_url: str | None = None, base_url: str = "") -> dict[str, Any]:
    return {
        "sessionId": "6d2bb3a9-1c9b-4a53-9a6e-2d2f5c0c6a10",
        "ownerName": "listener-test",
        "runnerScaleSet": {"id": 7, "name": "linux-x64"},
        "messageQueueUrl": mq_url
        if mq_url is not None
        else f"{base_url}/mq/7/messages?sessionId=abc",
        "messageQueueAccessToken": f"{MQ_TOKEN_PREFIX}{n}",
        "statistics": {"totalAssignedJobs": 0},
    }


@pytest.fixture
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def rsa_pem(rsa_key: rsa.RSAPrivateKey) -> str:
    return rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
async def fake_github() -> AsyncIterator[FakeGitHub]:
    fake = FakeGitHub()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.dispatch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.base_url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


class SleepRecorder:
    """An injectable sleep that records the requested waits and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
async def client(fake_github: FakeGitHub, sleeps: SleepRecorder) -> AsyncIterator[ActionsClient]:
    """A PAT client with the default retry schedule whose waits are recorded, not slept."""
    async with ActionsClient(
        fake_github.config_url,
        PatCredentials(PAT),
        retry=RetryPolicy(sleep=sleeps),
        environ={},
        timeout=10.0,
    ) as actions:
        yield actions
