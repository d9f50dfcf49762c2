"""No secret (PAT, private key, App JWT, installation/registration/admin/MQ token, JIT config)
reaches an exception text, a repr or a log line, even when the server echoes it back."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from arcflow.common.actions import (
    ActionsClient,
    ActionsClientError,
    AppCredentials,
    PatCredentials,
    RetryPolicy,
)

from .conftest import (
    INSTALLATION_TOKEN,
    JIT_CONFIG,
    MQ_TOKEN_PREFIX,
    PAT,
    REGISTRATION_TOKEN,
    FakeGitHub,
    sequence,
    session_body,
    status,
)

pytestmark = pytest.mark.integration

SCALE_SETS = "_apis/runtime/runnerscalesets"
SESSIONS = f"{SCALE_SETS}/7/sessions"
SESSION = f"{SESSIONS}/6d2bb3a9-1c9b-4a53-9a6e-2d2f5c0c6a10"
MQ = "/mq/7/messages"


def echo(code: int) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler that answers ``code`` quoting the request's Authorization header and body."""

    async def handler(request: web.Request) -> web.Response:
        body = (await request.read()).decode(errors="replace")
        text = f"you sent {request.headers.get('Authorization', '')} with {body}"
        return web.json_response({"typeName": "EchoException", "message": text}, status=code)

    return handler


class Evidence:
    """Everything a secret must never appear in."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add_error(self, error: BaseException) -> None:
        assert isinstance(error, ActionsClientError), repr(error)
        self.texts += [str(error), repr(error)]

    async def fails(self, call: object) -> None:
        try:
            await call  # type: ignore[misc]
        except ActionsClientError as error:
            self.add_error(error)
        else:
            pytest.fail("the call was expected to fail")

    def assert_clean(self, secrets: list[str], log_text: str) -> None:
        corpus = "\n".join([*self.texts, log_text])
        for secret in secrets:
            assert secret, "empty secret in the list"
            assert secret not in corpus, f"secret leaked: {secret[:12]}..."


async def test_pat_client_never_leaks(
    fake_github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    evidence = Evidence()
    fake_github.on(
        "POST", SESSIONS, sequence(status(200, session_body(0, base_url=fake_github.base_url)))
    )
    fake_github.on(
        "PATCH", SESSION, sequence(status(200, session_body(1, base_url=fake_github.base_url)))
    )
    fake_github.on("DELETE", SESSION, echo(500))
    fake_github.on("GET", MQ, sequence(status(401, {"message": "expired"})))
    fake_github.on("DELETE", f"{MQ}/1", echo(401))
    fake_github.on("POST", f"{SCALE_SETS}/7/acquirejobs", echo(400))
    fake_github.on(
        "POST",
        f"{SCALE_SETS}/7/generatejitconfig",
        sequence(
            status(200, {"runner": {"id": 1, "name": "r"}, "encodedJITConfig": JIT_CONFIG}),
            status(500, {"message": f"jit {JIT_CONFIG} failed"}),
        ),
    )
    fake_github.on("GET", f"{SCALE_SETS}/7", echo(400))
    fake_github.on(
        "GET", f"{SCALE_SETS}/8", sequence(status(200, {"id": "not-an-int", "name": PAT}))
    )

    async with ActionsClient(
        fake_github.config_url, PatCredentials(PAT), retry=RetryPolicy.fast(), environ={}
    ) as client:
        evidence.texts.append(repr(client))
        await evidence.fails(client.get_runner_scale_set_by_id(7))  # echoes the admin token
        await evidence.fails(client.get_runner_scale_set_by_id(8))  # malformed body
        jit = await client.generate_jit_runner_config(7, "r")
        evidence.texts += [repr(jit), str(jit), repr(jit.encoded_jit_config)]
        await evidence.fails(client.generate_jit_runner_config(7, "r"))  # 5xx body quotes the JIT
        session_client = client.message_session(7, "owner")
        session = await session_client.open()
        evidence.texts += [
            repr(session_client),
            repr(session),
            str(session),
            session.model_dump_json(),
        ]
        await evidence.fails(session_client.get_message(0, 1))  # 401, refresh, 401
        await evidence.fails(session_client.delete_message(1))  # echoes the MQ token
        await evidence.fails(session_client.acquire_jobs([1]))  # echoes the MQ token
        await evidence.fails(session_client.close())  # echoes the admin token

    fake_github.registration_token_statuses = [422]

    async def registration_echo(request: web.Request) -> web.Response:
        return web.json_response({"message": f"bad {request.headers['Authorization']}"}, status=422)

    fake_github.on(
        "POST", "/api/v3/orgs/example-org/actions/runners/registration-token", registration_echo
    )
    async with ActionsClient(
        fake_github.config_url, PatCredentials(PAT), retry=RetryPolicy.fast(), environ={}
    ) as second:
        await evidence.fails(second.delete_runner_scale_set(7))

    fake_github.registration_statuses = [403] * 5
    async with ActionsClient(
        fake_github.config_url, PatCredentials(PAT), retry=RetryPolicy.fast(), environ={}
    ) as third:
        await evidence.fails(third.delete_runner_scale_set(7))

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ActionsClient(
        f"http://127.0.0.1:{port}/org", PatCredentials(PAT), retry=RetryPolicy.fast(1), environ={}
    ) as dead:
        await evidence.fails(dead.delete_runner_scale_set(7))

    secrets = [PAT, REGISTRATION_TOKEN, JIT_CONFIG, f"{MQ_TOKEN_PREFIX}0", f"{MQ_TOKEN_PREFIX}1"]
    secrets += fake_github.admin_tokens
    assert len(fake_github.admin_tokens) >= 1
    evidence.assert_clean(secrets, caplog.text)
    # The leak checks above are meaningful only if the server really echoed the secrets.
    assert any("***" in text for text in evidence.texts)


async def test_app_client_never_leaks(
    fake_github: FakeGitHub,
    rsa_key: rsa.RSAPrivateKey,
    rsa_pem: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    evidence = Evidence()
    fake_github.app_public_key = rsa_key.public_key()

    async def access_echo(request: web.Request) -> web.Response:
        return web.json_response({"message": f"bad {request.headers['Authorization']}"}, status=500)

    fake_github.on("POST", "/api/v3/app/installations/42/access_tokens", access_echo)
    creds = AppCredentials(app_id="123", installation_id=42, private_key=rsa_pem)
    evidence.texts += [repr(creds), str(creds)]
    async with ActionsClient(
        fake_github.config_url, creds, retry=RetryPolicy.fast(), environ={}
    ) as client:
        evidence.texts.append(repr(client))
        await evidence.fails(client.delete_runner_scale_set(7))

    app_jwts = [
        r.headers["Authorization"].removeprefix("Bearer ")
        for r in fake_github.to("POST", "/api/v3/app/installations/42/access_tokens")
    ]
    assert len(app_jwts) == 5
    key_lines = [line for line in rsa_pem.splitlines() if "-----" not in line]
    evidence.assert_clean([*app_jwts, *key_lines, INSTALLATION_TOKEN], caplog.text)
