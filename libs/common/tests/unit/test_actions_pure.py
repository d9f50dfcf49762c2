"""Pure parts of the Actions client: URLs, models, message parsing, error mapping, retry
schedule, JWTs and credentials."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import SecretStr

from arcflow.common.actions import (
    AppCredentials,
    CredentialsError,
    InvalidResponseError,
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    Label,
    PatCredentials,
    RetryPolicy,
    RunnerScaleSet,
    create_app_jwt,
    credentials_from_secret_data,
    parse_job_messages,
    parse_runner_scale_set_message,
    read_jwt_expiry,
)
from arcflow.common.actions.client import AdminConnection, SystemInfo
from arcflow.common.actions.errors import (
    ActionsError,
    GitHubAPIError,
    JobStillRunningError,
    RunnerExistsError,
    RunnerNotFoundError,
    ScaleSetNotFoundError,
    SessionConflictError,
    error_from_response,
    parse_error_body,
    redact,
)
from arcflow.common.actions.models import (
    ZERO_TIME,
    decode_json,
    ensure_scale_set_labels,
    format_rfc3339,
    with_default_label_types,
)
from arcflow.common.actions.retry import (
    is_retryable_status,
    parse_retry_after,
)
from arcflow.common.actions.urls import (
    build_delete_message_url,
    build_message_url,
    build_service_url,
)

# -------------------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("base", "path", "query", "expected"),
    [
        (
            "http://h/tenant/123/",
            "/my/path?name=banana",
            None,
            "http://h/tenant/123/my/path?api-version=6.0-preview&name=banana",
        ),
        (
            "http://h/tenant/123",
            "_apis/runtime/runnergroups/",
            {"groupName": "a b&c"},
            "http://h/tenant/123/_apis/runtime/runnergroups/?api-version=6.0-preview&groupName=a%20b%26c",
        ),
        (
            "https://broker.actions.githubusercontent.com/rest/",
            "_apis/runtime/runnerscalesets",
            {"runnerGroupId": 1, "name": "x/y?z"},
            "https://broker.actions.githubusercontent.com/rest/_apis/runtime/runnerscalesets"
            "?api-version=6.0-preview&name=x%2Fy%3Fz&runnerGroupId=1",
        ),
        ("http://h/t/", "p?api-version=7.0", None, "http://h/t/p?api-version=7.0"),
    ],
)
def test_build_service_url(
    base: str, path: str, query: dict[str, str | int] | None, expected: str
) -> None:
    assert build_service_url(base, path, query) == expected


def test_message_urls_keep_the_opaque_queue_url() -> None:
    mq = "https://p.example/t/_apis/runtime/runnerscalesets/3/messages?sessionId=s1&api-version=6.0-preview"
    assert build_message_url(mq, 0) == mq
    assert build_message_url(mq, 100015778) == (
        "https://p.example/t/_apis/runtime/runnerscalesets/3/messages"
        "?api-version=6.0-preview&lastMessageId=100015778&sessionId=s1"
    )
    assert build_delete_message_url(mq, 5) == (
        "https://p.example/t/_apis/runtime/runnerscalesets/3/messages/5?sessionId=s1&api-version=6.0-preview"
    )
    assert build_delete_message_url("https://b.example/scalesets/message", 9) == (
        "https://b.example/scalesets/message/9"
    )


# ------------------------------------------------------------------------------------ models


def test_scale_set_decoding_is_lenient_and_case_insensitive() -> None:
    decoded = RunnerScaleSet.model_validate(
        {
            "id": 7,
            "NAME": "x",
            "labels": None,
            "runnerSetting": {"DisableUpdate": True},
            "unknown": {"deep": 1},
            "createdOn": "2026-01-05T07:37:55Z",
        }
    )
    assert decoded.name == "x"
    assert decoded.labels == []
    assert decoded.runner_setting.disable_update
    assert decoded.created_on == datetime(2026, 1, 5, 7, 37, 55, tzinfo=UTC)
    assert RunnerScaleSet.model_validate({}).created_on == ZERO_TIME


def test_request_body_matches_upstream_omitempty() -> None:
    body = RunnerScaleSet(
        name="my-set", runner_group_id=1, labels=[Label(type="System", name="my-set")]
    )
    body.runner_setting.disable_update = True
    assert json.dumps(body.to_request_body(), separators=(",", ":")) == (
        '{"name":"my-set","runnerGroupId":1,"labels":[{"type":"System","name":"my-set"}],'
        '"RunnerSetting":{"disableUpdate":true},"createdOn":"0001-01-01T00:00:00Z"}'
    )


def test_format_rfc3339() -> None:
    assert format_rfc3339(ZERO_TIME) == "0001-01-01T00:00:00Z"
    assert (
        format_rfc3339(datetime(2026, 1, 5, 7, 37, 55, 120000, tzinfo=UTC))
        == "2026-01-05T07:37:55.12Z"
    )


def test_label_defaulting() -> None:
    assert ensure_scale_set_labels(RunnerScaleSet(name="n")).labels == [
        Label(type="System", name="n")
    ]
    typed = ensure_scale_set_labels(
        RunnerScaleSet(name="n", labels=[Label(name="gpu"), Label(type="Custom", name="x")])
    ).labels
    assert typed == [Label(type="System", name="gpu"), Label(type="Custom", name="x")]
    with pytest.raises(ValueError, match="name or at least one label"):
        ensure_scale_set_labels(RunnerScaleSet())
    assert with_default_label_types([]) == []


def envelope(body: object, **extra: object) -> bytes:
    return json.dumps(
        {"messageId": 1, "messageType": "RunnerScaleSetJobMessages", "body": body, **extra}
    ).encode()


def test_message_parsing_double_encoded_body_with_all_types() -> None:
    jobs = [
        {"messageType": "JobAvailable", "runnerRequestId": 1001, "acquireJobUrl": "https://a"},
        {"messageType": "JobAssigned", "runnerRequestId": 0, "jobId": "j"},
        {
            "messageType": "JobStarted",
            "runnerId": 5,
            "runnerName": "r",
            "runnerAssignTime": "2026-01-01T00:00:01Z",
        },
        {"messageType": "Unknown", "whatever": True},
        {
            "messageType": "JobCompleted",
            "result": "succeeded",
            "finishTime": "2026-01-01T00:01:00Z",
        },
    ]
    msg = parse_runner_scale_set_message(
        envelope(json.dumps(jobs), statistics={"totalAssignedJobs": 2, "totalRunningJobs": 1})
    )
    assert [type(m) for m in msg.job_messages] == [
        JobAvailable,
        JobAssigned,
        JobStarted,
        JobCompleted,
    ]
    assert msg.jobs_available[0].runner_request_id == 1001
    assert msg.jobs_started[0].runner_assign_time == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert msg.jobs_completed[0].runner_assign_time == ZERO_TIME
    assert msg.statistics is not None
    assert msg.statistics.total_assigned_jobs == 2


@pytest.mark.parametrize("body", ["", "null", "[]", "  "])
def test_message_with_no_job_messages(body: str) -> None:
    assert parse_runner_scale_set_message(envelope(body)).job_messages == []


def test_message_without_body_key_and_with_bom() -> None:
    raw = (
        b"\xef\xbb\xbf"
        + json.dumps({"messageId": 2, "messageType": "RunnerScaleSetJobMessages"}).encode()
    )
    msg = parse_runner_scale_set_message(raw)
    assert msg.message_id == 2
    assert msg.job_messages == []
    assert msg.statistics is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty body"),
        (b"\xef\xbb\xbf", "empty body"),
        (b"{not json", "not valid JSON"),
        (b"[1]", "not a JSON object"),
        (
            envelope("[]").replace(b"RunnerScaleSetJobMessages", b"Other"),
            "unsupported message type",
        ),
        (envelope([{"messageType": "JobAssigned"}]), "must be a JSON string"),
        (envelope("{}"), "must be a JSON array"),
        (envelope("[1]"), "not a JSON object"),
        (envelope('[{"messageType":"JobStarted","runnerId":"abc"}]'), "job message 0 is malformed"),
    ],
)
def test_malformed_messages_are_clear_errors(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidResponseError, match=reason):
        parse_runner_scale_set_message(raw)


def test_parse_job_messages_skips_unknown_types() -> None:
    assert parse_job_messages('[{"messageType":"JobFuture"},{}]') == []


def test_decode_json_strips_bom_and_never_quotes_the_body() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a":1}') == {"a": 1}
    with pytest.raises(InvalidResponseError) as info:
        decode_json(b"token=SUPERSECRET-not-json")
    assert "SUPERSECRET" not in str(info.value)


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("type_name", "status", "expected"),
    [
        (
            "GitHub.DistributedTask.WebApi.AgentExistsException, GitHub.DistributedTask.WebApi",
            409,
            RunnerExistsError,
        ),
        ("GitHub.DistributedTask.WebApi.AgentNotFoundException", 404, RunnerNotFoundError),
        ("GitHub.DistributedTask.WebApi.JobStillRunningException", 400, JobStillRunningError),
        (
            "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException",
            409,
            SessionConflictError,
        ),
        (
            "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException",
            404,
            ScaleSetNotFoundError,
        ),
        ("SomeOtherException", 400, ActionsError),
    ],
)
def test_error_mapping_from_type_name(
    type_name: str, status: int, expected: type[ActionsError]
) -> None:
    body = json.dumps({"typeName": type_name, "message": "why"}).encode()
    error = error_from_response(
        method="GET", url="http://svc/x", status=status, content_type="application/json", body=body
    )
    assert type(error) is expected
    assert error.type_name == type_name
    assert error.message == "why"
    assert error.status == status
    assert str(error).endswith(f"{type_name}: why")


def test_error_status_override_and_github_api() -> None:
    conflict = error_from_response(
        method="POST",
        url="u",
        status=409,
        content_type="",
        body=b"",
        status_overrides={409: SessionConflictError},
    )
    assert type(conflict) is SessionConflictError
    assert str(conflict).endswith("unknown error")
    api = error_from_response(
        method="POST", url="u", status=422, content_type="", body=b"{}", github_api=True
    )
    assert type(api) is GitHubAPIError


@pytest.mark.parametrize(
    ("content_type", "body", "detail"),
    [
        ("application/json", b"", "unknown error"),
        ("text/plain; charset=utf-8", b"plain failure", "plain failure"),
        ("application/json", b"{oops", "failed to unmarshal error response body: '{oops'"),
        ("application/json", b'\xef\xbb\xbf{"message":"only message"}', "only message"),
        ("application/json", b'{"TypeName":"X","Message":"y"}', "X: y"),
    ],
)
def test_error_body_detail(content_type: str, body: bytes, detail: str) -> None:
    assert parse_error_body(content_type, body)[2] == detail


def test_error_text_format() -> None:
    error = error_from_response(
        method="DELETE",
        url="http://svc/_apis/x?api-version=6.0-preview",
        status=404,
        content_type="text/plain",
        body=b"gone",
        activity_id="a1",
        request_id="r1",
    )
    assert str(error) == (
        'request DELETE http://svc/_apis/x?api-version=6.0-preview failed(status="404 Not Found", '
        'activity_id="a1", github_request_id="r1"): gone'
    )


def test_redact_replaces_longest_secret_first_and_ignores_short_ones() -> None:
    assert (
        redact("a TOKEN123456 b TOKEN123456789", ["TOKEN123456", "TOKEN123456789"]) == "a *** b ***"
    )
    assert redact("token is abc", ["abc"]) == "token is abc"


# ------------------------------------------------------------------------------------- retry


def test_default_schedule_and_cap() -> None:
    assert RetryPolicy().schedule() == [1.0, 2.0, 4.0, 8.0]
    assert RetryPolicy(max_retries=7).schedule() == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert RetryPolicy(max_retries=0).schedule() == []
    assert RetryPolicy().max_attempts == 5


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetryPolicy()
    assert policy.wait_for(0, status=503, retry_after="120", now=now) == 120.0  # not capped
    later = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert policy.wait_for(1, status=429, retry_after=later, now=now) == 90.0
    past = format_datetime(now - timedelta(seconds=90), usegmt=True)
    assert policy.wait_for(1, status=429, retry_after=past, now=now) == 0.0
    assert policy.wait_for(2, status=500, retry_after="120", now=now) == 4.0
    assert policy.wait_for(2, status=503, retry_after="soon", now=now) == 4.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") is None


@pytest.mark.parametrize(
    ("status", "retryable"),
    [(429, True), (500, True), (502, True), (503, True), (599, True), (501, False), (400, False),
     (401, False), (403, False), (404, False), (409, False), (200, False)],
)  # fmt: skip
def test_retryable_statuses(status: int, retryable: bool) -> None:
    assert is_retryable_status(status) is retryable


def test_registration_extra_statuses() -> None:
    assert is_retryable_status(401, frozenset({401, 403}))
    assert not is_retryable_status(409, frozenset({401, 403}))


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


# ------------------------------------------------------------------------------ JWT and creds


@pytest.fixture(scope="module")
def pem_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pkcs1 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return pkcs1, pkcs8


def test_app_jwt_claims(pem_pair: tuple[str, str]) -> None:
    for pem in pem_pair:
        creds = AppCredentials(app_id=123, installation_id=9, private_key=pem)
        now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
        token = create_app_jwt(creds, now=now)
        public = creds.signing_key.public_key()
        claims = jwt.decode(token, public, algorithms=["RS256"], options={"verify_exp": False})
        assert claims == {
            "iat": int(now.timestamp()) - 60,
            "exp": int(now.timestamp()) + 480,
            "iss": "123",
        }
        assert jwt.get_unverified_header(token)["alg"] == "RS256"


def test_read_jwt_expiry_ignores_signature_and_past_expiry() -> None:
    exp = datetime(2020, 1, 1, tzinfo=UTC)
    token = jwt.encode(
        {"exp": int(exp.timestamp())}, "someone-elses-key-of-sufficient-size", algorithm="HS256"
    )
    assert read_jwt_expiry(token) == exp
    with pytest.raises(ValueError, match="no numeric exp"):
        read_jwt_expiry(jwt.encode({"iss": "x"}, "k" * 32, algorithm="HS256"))
    with pytest.raises(ValueError, match="not a decodable JWT") as info:
        read_jwt_expiry("opaque-secret-admin-token")
    assert "opaque-secret-admin-token" not in str(info.value)


def test_admin_connection_refresh_margin() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    conn = AdminConnection("http://svc/", SecretStr("t"), now + timedelta(seconds=61))
    assert not conn.needs_refresh(now)
    assert conn.needs_refresh(now + timedelta(seconds=2))
    assert "**********" in repr(conn)
    assert "'t'" not in repr(conn)


def test_credentials_from_secret_data(pem_pair: tuple[str, str]) -> None:
    pat = credentials_from_secret_data({"github_token": b"ghp_abcdef123456\n"})
    assert isinstance(pat, PatCredentials)
    assert pat.token.get_secret_value() == "ghp_abcdef123456"
    app = credentials_from_secret_data(
        {
            "github_app_id": "Iv1.abc",
            "github_app_installation_id": b"42",
            "github_app_private_key": pem_pair[1].encode(),
        }
    )
    assert isinstance(app, AppCredentials)
    assert app.installation_id == 42
    assert app.app_id == "Iv1.abc"
    escaped = credentials_from_secret_data(
        {
            "github_app_id": "1",
            "github_app_installation_id": "2",
            "github_app_private_key": pem_pair[0].replace("\n", "\\n"),
        }
    )
    assert isinstance(escaped, AppCredentials)


SECRET_VALUE = "ghp_DO_NOT_ECHO_ME_123456"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({}, "no credentials"),
        ({"github_token": "  "}, "no credentials"),
        (
            {"github_token": SECRET_VALUE, "github_app_id": "1"},
            "both github_token and GitHub App keys",
        ),
        (
            {"github_app_id": "1", "github_app_private_key": SECRET_VALUE},
            "missing github_app_installation_id",
        ),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": SECRET_VALUE,
                "github_app_private_key": "x",
            },
            "github_app_installation_id must be an integer",
        ),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "0",
                "github_app_private_key": SECRET_VALUE,
            },
            "must be a positive integer",
        ),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "5",
                "github_app_private_key": SECRET_VALUE,
            },
            "not an unencrypted RSA private key",
        ),
        ({"github_token": b"\xff\xfe" + SECRET_VALUE.encode()}, "github_token is not valid UTF-8"),
    ],
)
def test_malformed_secret_data_is_a_clear_error_without_values(
    data: dict[str, str | bytes], reason: str
) -> None:
    with pytest.raises(CredentialsError, match=reason) as info:
        credentials_from_secret_data(data)
    assert SECRET_VALUE not in str(info.value)
    assert SECRET_VALUE not in repr(info.value)


def test_non_rsa_key_is_rejected() -> None:
    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    with pytest.raises(CredentialsError, match="not an RSA key"):
        AppCredentials(app_id="1", installation_id=1, private_key=ec_pem)


def test_credential_reprs_hide_secrets(pem_pair: tuple[str, str]) -> None:
    pat = PatCredentials(SECRET_VALUE)
    app = AppCredentials(app_id="7", installation_id=1, private_key=pem_pair[0])
    assert SECRET_VALUE not in repr(pat)
    assert SECRET_VALUE not in str(pat)
    body_line = pem_pair[0].splitlines()[1]
    assert body_line not in repr(app)
    assert body_line not in str(app)
    with pytest.raises(CredentialsError):
        PatCredentials("")


def test_user_agent_is_compact_json_in_order() -> None:
    agent = SystemInfo(
        version="0.1", commit_sha="abc", scale_set_id=10, subsystem="listener"
    ).user_agent()
    assert agent.startswith(
        '{"system":"arcflow","version":"0.1","commit_sha":"abc","scale_set_id":10,"subsystem":"listener",'
    )
    assert " " not in agent


def test_client_api_base_follows_the_given_environment() -> None:
    from arcflow.common.actions import ActionsClient

    hosted = ActionsClient("https://github.com/org/repo", PatCredentials("ghp_x123456"), environ={})
    forced = ActionsClient(
        "https://github.com/org/repo",
        PatCredentials("ghp_x123456"),
        environ={"GITHUB_ACTIONS_FORCE_GHES": "1"},
    )
    assert hosted.config.api_base == "https://api.github.com"
    assert forced.config.api_base == "https://github.com/api/v3"
    assert (
        forced.config.registration_token_path
        == "/repos/org/repo/actions/runners/registration-token"
    )
