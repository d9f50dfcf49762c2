"""ActionsClient over real HTTP against a local aiohttp server: token chain, headers, status
checks, retries and error mapping."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from arcflow.common.actions import (
    ActionsClient,
    ActionsError,
    AmbiguousResultError,
    AppCredentials,
    GitHubAPIError,
    InvalidResponseError,
    JobStillRunningError,
    PatCredentials,
    RetriesExhaustedError,
    RetryPolicy,
    RunnerExistsError,
    RunnerGroupNotFoundError,
    RunnerNotFoundError,
    RunnerScaleSet,
    RunnerSetting,
    ScaleSetNotFoundError,
    SessionConflictError,
    SystemInfo,
)
from arcflow.common.actions.retry import retry_deadline

from .conftest import (
    JIT_CONFIG,
    PAT,
    REGISTRATION_TOKEN,
    FakeGitHub,
    SleepRecorder,
    sequence,
    session_body,
    status,
)

pytestmark = pytest.mark.integration

GROUPS = "_apis/runtime/runnergroups/"
SCALE_SETS = "_apis/runtime/runnerscalesets"
AGENTS = "_apis/distributedtask/pools/0/agents"


def scale_set_json(**extra: object) -> dict[str, object]:
    return {"id": 7, "name": "linux-x64", "runnerGroupId": 1, "runnerGroupName": "Default", **extra}


# ---------------------------------------------------------------------------- token chain


async def test_pat_chain_is_lazy_then_runs_once_with_exact_headers(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "GET", GROUPS, sequence(status(200, {"count": 1, "value": [{"id": 3, "name": "g"}]}))
    )
    assert fake_github.requests == []  # constructing the client did no I/O

    group = await client.get_runner_group_by_name("my group/x")
    await client.get_runner_group_by_name("my group/x")

    assert group.id == 3
    assert group.name == "g"
    reg_token, registration, first, second = fake_github.requests
    assert reg_token.path == "/api/v3/orgs/example-org/actions/runners/registration-token"
    assert reg_token.headers["Authorization"] == f"Bearer {PAT}"
    assert reg_token.headers["Content-Type"] == "application/vnd.github.v3+json"
    assert "Accept" not in reg_token.headers
    assert registration.path == "/api/v3/actions/runner-registration"
    assert registration.headers["Authorization"] == f"RemoteAuth {REGISTRATION_TOKEN}"
    assert registration.headers["Content-Type"] == "application/json"
    assert registration.body == (
        json.dumps(
            {"url": fake_github.config_url, "runner_event": "register"}, separators=(",", ":")
        ).encode()
        + b"\n"
    )
    # The trailing "/" before "?" is kept; the name is URL-escaped; api-version is added.
    assert first.path == "/tenant/1/_apis/runtime/runnergroups/"
    assert first.raw_query == "api-version=6.0-preview&groupName=my%20group%2Fx"
    assert first.query["groupName"] == "my group/x"
    assert first.headers["Authorization"] == f"Bearer {fake_github.admin_tokens[0]}"
    assert first.headers["Content-Type"] == "application/json"
    assert "Accept" not in first.headers
    assert json.loads(first.headers["User-Agent"])["system"] == "arcflow"
    assert second.headers["Authorization"] == first.headers["Authorization"]


async def test_app_chain_mints_a_verifiable_jwt_and_uses_the_installation_token(
    fake_github: FakeGitHub, rsa_key: rsa.RSAPrivateKey, rsa_pem: str
) -> None:
    fake_github.app_public_key = rsa_key.public_key()
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    creds = AppCredentials(app_id="Iv1.abc123", installation_id=42, private_key=rsa_pem)
    async with ActionsClient(
        fake_github.config_url, creds, retry=RetryPolicy.fast(), environ={}
    ) as client:
        await client.delete_runner_scale_set(7)

    access, reg_token, _registration, delete = fake_github.requests
    assert access.path == "/api/v3/app/installations/42/access_tokens"
    assert access.headers["Content-Type"] == "application/vnd.github+json"
    claims = jwt.decode(
        access.headers["Authorization"].removeprefix("Bearer "),
        rsa_key.public_key(),
        algorithms=["RS256"],
    )
    assert claims["iss"] == "Iv1.abc123"
    assert claims["exp"] - claims["iat"] == 540
    assert abs(claims["iat"] - (datetime.now(UTC).timestamp() - 60)) < 10
    assert reg_token.headers["Authorization"] == "Bearer ghs_INSTALLATION_SECRET_987654"
    assert delete.method == "DELETE"
    assert delete.path == "/tenant/1/_apis/runtime/runnerscalesets/7"


async def test_admin_token_is_refreshed_when_it_expires_within_60_seconds(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    fake_github.admin_ttl = 55  # inside the 60 s margin: every call refreshes
    await client.delete_runner_scale_set(7)
    await client.delete_runner_scale_set(7)
    assert len(fake_github.to("POST", "/api/v3/actions/runner-registration")) == 2
    deletes = fake_github.to("DELETE", f"{SCALE_SETS}/7")
    assert [d.headers["Authorization"] for d in deletes] == [
        f"Bearer {t}" for t in fake_github.admin_tokens
    ]


async def test_admin_token_outside_the_margin_is_reused(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    fake_github.admin_ttl = 65
    await client.delete_runner_scale_set(7)
    await client.delete_runner_scale_set(7)
    assert len(fake_github.to("POST", "/api/v3/actions/runner-registration")) == 1


async def test_failed_refresh_fails_the_call_and_keeps_the_old_connection(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    fake_github.admin_ttl = 30
    await client.delete_runner_scale_set(7)
    old = client._admin
    fake_github.registration_token_statuses = [422]
    with pytest.raises(GitHubAPIError) as info:
        await client.delete_runner_scale_set(7)
    assert info.value.status == 422
    assert "failed to get runner registration token (422)" in str(info.value)
    assert "registration token refused" in str(info.value)
    assert client._admin is old
    assert len(fake_github.to("DELETE", f"{SCALE_SETS}/7")) == 1  # the failing call sent nothing


async def test_runner_registration_retries_401_and_403(
    fake_github: FakeGitHub, client: ActionsClient, sleeps: SleepRecorder
) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    fake_github.registration_statuses = [401, 403]
    await client.delete_runner_scale_set(7)
    assert len(fake_github.to("POST", "/api/v3/actions/runner-registration")) == 3
    assert sleeps.waits == [1.0, 2.0]


async def test_runner_registration_401_exhausted_reports_the_last_body(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.registration_statuses = [401] * 5
    with pytest.raises(GitHubAPIError) as info:
        await client.delete_runner_scale_set(7)
    assert info.value.status == 401
    assert "not yet" in str(info.value)
    assert len(fake_github.to("POST", "/api/v3/actions/runner-registration")) == 5


# ---------------------------------------------------------------------------------- retries


@pytest.mark.parametrize("code", [500, 502, 503, 429])
async def test_retryable_status_is_tried_retry_max_plus_one_times(
    fake_github: FakeGitHub, client: ActionsClient, sleeps: SleepRecorder, code: int
) -> None:
    fake_github.on("GET", f"{SCALE_SETS}/7", sequence(status(code, {"message": "down"})))
    with pytest.raises(RetriesExhaustedError) as info:
        await client.get_runner_scale_set_by_id(7)
    assert len(fake_github.to("GET", f"{SCALE_SETS}/7")) == 5
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]
    assert info.value.attempts == 5
    assert info.value.status == code
    assert "giving up after 5 attempt(s)" in str(info.value)


@pytest.mark.parametrize("code", [401, 403, 409, 400, 404, 501])
async def test_non_retryable_status_is_sent_once(
    fake_github: FakeGitHub, client: ActionsClient, sleeps: SleepRecorder, code: int
) -> None:
    fake_github.on("GET", f"{SCALE_SETS}/7", sequence(status(code, {"message": "no"})))
    with pytest.raises(ActionsError) as info:
        await client.get_runner_scale_set_by_id(7)
    assert not isinstance(info.value, RetriesExhaustedError)
    assert info.value.status == code
    assert len(fake_github.to("GET", f"{SCALE_SETS}/7")) == 1
    assert sleeps.waits == []


async def test_retry_after_seconds_and_http_date_are_honoured_uncapped(
    fake_github: FakeGitHub, client: ActionsClient, sleeps: SleepRecorder
) -> None:
    http_date = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    fake_github.on(
        "GET",
        f"{SCALE_SETS}/7",
        sequence(
            status(503, headers={"Retry-After": "45"}),
            status(429, headers={"Retry-After": http_date}),
            status(500, headers={"Retry-After": "99"}),  # ignored on 500: backoff applies
            status(200, scale_set_json()),
        ),
    )
    result = await client.get_runner_scale_set_by_id(7)
    assert result is not None
    assert result.id == 7
    assert sleeps.waits[0] == 45.0
    assert 100 < sleeps.waits[1] <= 120
    assert sleeps.waits[2] == 4.0


async def test_retry_max_zero_sends_once(fake_github: FakeGitHub) -> None:
    fake_github.on("GET", f"{SCALE_SETS}/7", sequence(status(500)))
    async with ActionsClient(
        fake_github.config_url,
        PatCredentials(PAT),
        retry=RetryPolicy.fast(max_retries=0),
        environ={},
    ) as client:
        with pytest.raises(RetriesExhaustedError):
            await client.get_runner_scale_set_by_id(7)
    assert len(fake_github.to("GET", f"{SCALE_SETS}/7")) == 1


async def test_transport_errors_are_retried_then_reported(sleeps: SleepRecorder) -> None:
    # A port nobody listens on: connection refused on every attempt.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ActionsClient(
        f"http://127.0.0.1:{port}/org",
        PatCredentials(PAT),
        retry=RetryPolicy(sleep=sleeps),
        environ={},
    ) as client:
        with pytest.raises(RetriesExhaustedError) as info:
            await client.delete_runner_scale_set(1)
    assert info.value.status == 0
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]
    assert PAT not in str(info.value)


# ----------------------------------------------------------------------- endpoint behaviour


async def test_runner_group_lookup_errors_on_zero_or_many(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "GET",
        GROUPS,
        sequence(
            status(200, {"count": 0, "value": []}),
            status(200, {"count": 2, "value": [{"id": 1}, {"id": 2}]}),
        ),
    )
    with pytest.raises(RunnerGroupNotFoundError, match="no runner group found with name 'x'"):
        await client.get_runner_group_by_name("x")
    with pytest.raises(AmbiguousResultError):
        await client.get_runner_group_by_name("x")


async def test_scale_set_by_name_is_decided_by_count(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "GET",
        SCALE_SETS,
        sequence(
            status(200, {"count": 0, "value": [scale_set_json()]}),
            status(200, {"count": 1, "value": [scale_set_json()]}),
            status(200, {"count": 2, "value": [scale_set_json()]}),
        ),
    )
    assert await client.get_runner_scale_set(1, "linux-x64") is None
    found = await client.get_runner_scale_set(1, "linux-x64")
    assert found is not None
    assert found.id == 7
    with pytest.raises(AmbiguousResultError, match="multiple runner scale sets"):
        await client.get_runner_scale_set(1, "linux-x64")
    assert fake_github.requests[-1].query == {
        "runnerGroupId": "1",
        "name": "linux-x64",
        "api-version": "6.0-preview",
    }


async def test_scale_set_by_id_null_is_none_and_404_is_typed(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("GET", f"{SCALE_SETS}/7", sequence(status(200, None), status(404)))

    async def null_body(_r: web.Request) -> web.Response:
        return web.Response(status=200, body=b"\xef\xbb\xbfnull", content_type="application/json")

    fake_github.on("GET", f"{SCALE_SETS}/8", null_body)
    assert await client.get_runner_scale_set_by_id(8) is None
    with pytest.raises(InvalidResponseError, match="empty"):
        await client.get_runner_scale_set_by_id(7)  # 200 with no body at all
    with pytest.raises(ScaleSetNotFoundError):
        await client.get_runner_scale_set_by_id(7)


async def test_create_scale_set_sends_the_upstream_body_and_needs_exactly_200(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "POST",
        SCALE_SETS,
        sequence(
            status(200, scale_set_json(labels=[{"type": "System", "name": "linux-x64"}])),
            status(201, {}),
        ),
    )
    created = await client.create_runner_scale_set(
        RunnerScaleSet(
            name="linux-x64", runner_group_id=1, runner_setting=RunnerSetting(disable_update=True)
        )
    )
    assert created.id == 7
    assert fake_github.to("POST", SCALE_SETS)[0].json() == {
        "name": "linux-x64",
        "runnerGroupId": 1,
        "labels": [{"type": "System", "name": "linux-x64"}],
        "RunnerSetting": {"disableUpdate": True},
        "createdOn": "0001-01-01T00:00:00Z",
    }
    with pytest.raises(ActionsError) as info:
        await client.create_runner_scale_set(RunnerScaleSet(name="linux-x64"))
    assert info.value.status == 201


async def test_create_without_name_and_labels_sends_nothing(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    with pytest.raises(ValueError, match="name or at least one label"):
        await client.create_runner_scale_set(RunnerScaleSet(runner_group_id=1))
    assert fake_github.requests == []


async def test_update_sends_partial_body_with_runner_setting(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "PATCH", f"{SCALE_SETS}/7", sequence(status(200, scale_set_json(runnerGroupId=3)))
    )
    updated = await client.update_runner_scale_set(7, RunnerScaleSet(runner_group_id=3))
    assert updated.runner_group_id == 3
    assert fake_github.to("PATCH", f"{SCALE_SETS}/7")[0].json() == {
        "runnerGroupId": 3,
        "RunnerSetting": {"disableUpdate": False},
        "createdOn": "0001-01-01T00:00:00Z",
    }


async def test_delete_scale_set_treats_200_as_an_error(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(200, {})))
    with pytest.raises(ActionsError) as info:
        await client.delete_runner_scale_set(7)
    assert info.value.status == 200


async def test_session_create_errors_are_typed(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    conflict = {
        "typeName": "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException, "
        "GitHub.Actions.Runtime.WebApi",
        "message": "The actions runner scaleset dev already has an active session.",
    }
    fake_github.on(
        "POST",
        f"{SCALE_SETS}/7/sessions",
        sequence(
            status(409, conflict),
            status(409, {"message": "plain conflict"}),
            status(404),
            status(200, session_body(mq_url="")),
        ),
    )
    with pytest.raises(SessionConflictError, match="already has an active session"):
        await client.create_message_session(7, "owner")
    with pytest.raises(SessionConflictError):
        await client.create_message_session(7, "owner")
    with pytest.raises(ScaleSetNotFoundError):
        await client.create_message_session(7, "owner")
    with pytest.raises(InvalidResponseError, match="empty messageQueueUrl"):
        await client.create_message_session(7, "owner")
    assert fake_github.to("POST", f"{SCALE_SETS}/7/sessions")[0].json() == {"ownerName": "owner"}


async def test_acquirable_jobs_204_is_empty(fake_github: FakeGitHub, client: ActionsClient) -> None:
    job = {"messageType": "JobAvailable", "runnerRequestId": 1001, "requestLabels": ["linux-x64"]}
    fake_github.on(
        "GET",
        f"{SCALE_SETS}/7/acquirablejobs",
        sequence(status(204), status(200, {"count": 1, "value": [job]})),
    )
    assert await client.get_acquirable_jobs(7) == []
    jobs = await client.get_acquirable_jobs(7)
    assert [j.runner_request_id for j in jobs] == [1001]


async def test_jit_config_and_runner_errors_are_typed(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on(
        "POST",
        f"{SCALE_SETS}/7/generatejitconfig",
        sequence(
            status(
                200,
                {
                    "runner": {"id": 12, "name": "r1", "runnerScaleSetId": 7},
                    "encodedJITConfig": JIT_CONFIG,
                },
            ),
            status(
                409,
                {
                    "typeName": "GitHub.DistributedTask.WebApi.AgentExistsException",
                    "message": "exists",
                },
            ),
        ),
    )
    fake_github.on(
        "DELETE",
        f"{AGENTS}/12",
        sequence(
            status(
                400,
                {
                    "typeName": "GitHub.DistributedTask.WebApi.JobStillRunningException",
                    "message": "busy",
                },
            ),
            status(
                404,
                {
                    "typeName": "GitHub.DistributedTask.WebApi.AgentNotFoundException",
                    "message": "gone",
                },
            ),
            status(204),
        ),
    )
    fake_github.on("GET", f"{AGENTS}/12", sequence(status(404)))
    fake_github.on(
        "GET", AGENTS, sequence(status(200, {"count": 1, "value": [{"id": 12, "name": "r1"}]}))
    )

    config = await client.generate_jit_runner_config(7, "r1", "/work")
    assert config.runner.id == 12
    assert config.encoded_jit_config.get_secret_value() == JIT_CONFIG
    assert fake_github.to("POST", f"{SCALE_SETS}/7/generatejitconfig")[0].json() == {
        "name": "r1",
        "workFolder": "/work",
    }
    with pytest.raises(RunnerExistsError):
        await client.generate_jit_runner_config(7, "r1")
    with pytest.raises(JobStillRunningError):
        await client.remove_runner(12)
    with pytest.raises(RunnerNotFoundError):
        await client.remove_runner(12)
    await client.remove_runner(12)
    with pytest.raises(RunnerNotFoundError):
        await client.get_runner(12)
    runner = await client.get_runner_by_name("r1")
    assert runner is not None
    assert runner.id == 12


async def test_error_text_carries_status_ids_and_detail(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    async def failing(_r: web.Request) -> web.Response:
        return web.Response(
            status=400,
            text="plain words",
            content_type="text/plain",
            headers={"ActivityId": "act-1", "X-GitHub-Request-Id": "req-2"},
        )

    fake_github.on("GET", f"{SCALE_SETS}/7", failing)
    with pytest.raises(ActionsError) as info:
        await client.get_runner_scale_set_by_id(7)
    text = str(info.value)
    assert text.startswith(
        f"request GET {fake_github.service_url}_apis/runtime/runnerscalesets/7"
        "?api-version=6.0-preview failed("
    )
    assert text.endswith(
        'failed(status="400 Bad Request", activity_id="act-1", '
        'github_request_id="req-2"): plain words'
    )
    assert info.value.activity_id == "act-1"
    assert info.value.request_id == "req-2"


async def test_set_scale_set_id_updates_the_user_agent(fake_github: FakeGitHub) -> None:
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    info = SystemInfo(version="1.2.3", commit_sha="abc", subsystem="registrar")
    async with ActionsClient(
        fake_github.config_url,
        PatCredentials(PAT),
        system_info=info,
        retry=RetryPolicy.fast(),
        environ={},
    ) as client:
        client.set_scale_set_id(7)
        await client.delete_runner_scale_set(7)
    agent = json.loads(fake_github.to("DELETE", f"{SCALE_SETS}/7")[0].headers["User-Agent"])
    assert list(agent)[:5] == ["system", "version", "commit_sha", "scale_set_id", "subsystem"]
    assert agent["scale_set_id"] == 7
    assert agent["version"] == "1.2.3"
    assert agent["subsystem"] == "registrar"


# ------------------------------------------------------------------------- proxy and TLS


async def test_proxy_carries_every_request(fake_github: FakeGitHub) -> None:
    # The config URL's host does not resolve; only the proxy (our server) can answer.
    fake_github.on("DELETE", f"{SCALE_SETS}/7", sequence(status(204)))
    async with ActionsClient(
        "http://actions.invalid/example-org",
        PatCredentials(PAT),
        retry=RetryPolicy.fast(),
        proxy=fake_github.base_url,
        environ={},
    ) as client:
        await client.delete_runner_scale_set(7)
    hosts = [r.headers["Host"] for r in fake_github.requests]
    assert hosts[:2] == ["actions.invalid", "actions.invalid"]
    assert [r.path for r in fake_github.requests][-1] == "/tenant/1/_apis/runtime/runnerscalesets/7"


def test_root_ca_pem_is_validated() -> None:
    with pytest.raises(ValueError, match="root_ca_pem is not a valid PEM"):
        ActionsClient(
            "https://ghes.example/org", PatCredentials(PAT), root_ca_pem="garbage", environ={}
        )


def test_root_ca_pem_is_added_to_the_system_store() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    from arcflow.common.actions.tls import server_ssl_context

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "arcflow test root")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    context = server_ssl_context(pem)
    subjects = [str(c.get("subject")) for c in context.get_ca_certs()]
    assert any("arcflow test root" in subject for subject in subjects)
    ActionsClient("https://ghes.example/org", PatCredentials(PAT), root_ca_pem=pem, environ={})


async def test_no_retry_starts_whose_wait_passes_the_callers_deadline(
    fake_github: FakeGitHub, client: ActionsClient, sleeps: SleepRecorder
) -> None:
    """ADR 0044: inside ``retry_deadline`` a retry whose wait would end at or after the
    deadline is not made; the request gives up at once, saying why."""
    fake_github.on("GET", f"{SCALE_SETS}/7", sequence(status(503, {"message": "down"})))
    deadline = asyncio.get_running_loop().time() + 2.5  # the recorded sleeps take no time
    with retry_deadline(deadline), pytest.raises(RetriesExhaustedError) as info:
        await client.get_runner_scale_set_by_id(7)
    assert sleeps.waits == [1.0, 2.0]  # 4.0 would pass the deadline
    assert len(fake_github.to("GET", f"{SCALE_SETS}/7")) == 3
    assert info.value.attempts == 3
    assert info.value.status == 503
    assert "caller's deadline leaves no time" in str(info.value)


async def test_several_scale_sets_by_name_carry_status_and_ids(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    """Like every other request error: the status, ``ActivityId`` and ``X-GitHub-Request-Id``
    of the answer, in the text and as attributes (docs/actions-client.md#errors)."""
    ids = {"ActivityId": "act-5c1e", "X-GitHub-Request-Id": "REQ-77"}
    fake_github.on(
        "GET",
        SCALE_SETS,
        sequence(status(200, {"count": 2, "value": [scale_set_json(), scale_set_json()]}, ids)),
    )
    with pytest.raises(AmbiguousResultError) as caught:
        await client.get_runner_scale_set(1, "linux-x64")
    error = caught.value
    assert isinstance(error, ActionsError)
    assert (error.status, error.activity_id, error.request_id) == (200, "act-5c1e", "REQ-77")
    assert error.method == "GET"
    assert not error.retryable
    text = str(error)
    assert 'status="200 OK"' in text
    assert 'activity_id="act-5c1e"' in text
    assert 'github_request_id="REQ-77"' in text
    assert text.endswith("multiple runner scale sets found with name 'linux-x64'")
    assert PAT not in text
