"""The one async client through which arcflow talks to GitHub's Actions scale-set service.

Upstream behaviour: docs/upstream-behaviour.md#actions-endpoints. Design:
- lazy token chain (PAT or App JWT -> installation token -> registration token ->
  runner-registration -> admin JWT), refreshed under a lock only when the admin token is within
  60 s of its ``exp``;
- one shared ``httpx.AsyncClient``; every request goes through :meth:`ActionsClient._send`,
  which applies the retry policy and never logs headers;
- exact status checks per endpoint, typed errors built from the response only, scrubbed of every
  secret the client knows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import SecretStr

from arcflow.common.actions.auth import (
    AppCredentials,
    Credentials,
    PatCredentials,
    create_app_jwt,
    read_jwt_expiry,
)
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.errors import (
    ActionsError,
    AmbiguousResultError,
    InvalidResponseError,
    MessageQueueTokenExpiredError,
    NilSessionError,
    RetriesExhaustedError,
    RunnerGroupNotFoundError,
    RunnerNotFoundError,
    ScaleSetNotFoundError,
    SessionConflictError,
    ambiguous_result,
    error_from_response,
    redact,
)
from arcflow.common.actions.models import (
    JitRunnerConfig,
    JobAvailable,
    MessageSession,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerScaleSetMessage,
    decode_json,
    ensure_scale_set_labels,
    parse_runner_scale_set_message,
    validate_wire,
    with_default_label_types,
)
from arcflow.common.actions.retry import (
    RetryPolicy,
    is_retryable_error,
    is_retryable_status,
    out_of_time,
)
from arcflow.common.actions.tls import server_ssl_context
from arcflow.common.actions.urls import (
    AGENTS_PATH,
    API_VERSION,
    RUNNER_GROUPS_PATH,
    SCALE_SETS_PATH,
    build_delete_message_url,
    build_message_url,
    build_service_url,
    escape_segment,
    scale_set_path,
)
from arcflow.common.github_url import GitHubConfig, parse_github_config_url

if TYPE_CHECKING:
    from arcflow.common.actions.session import ConflictRetry, MessageSessionClient

logger = logging.getLogger("arcflow.actions")

ADMIN_REFRESH_MARGIN = timedelta(seconds=60)
DEFAULT_TIMEOUT = 300.0
MAX_REMEMBERED_SECRETS = 256
_REGISTRATION_RETRY_EXTRA = frozenset({401, 403})


@cache
def _build_version() -> str:
    try:
        return package_version("arcflow-common")
    except PackageNotFoundError:
        return "unknown"


def is_nil_session_id(session_id: str) -> bool:
    """True for the nil UUID in any spelling (with or without dashes or braces)."""
    try:
        return uuid.UUID(session_id.strip()).int == 0
    except ValueError:
        return False


@dataclass(frozen=True)
class SystemInfo:
    """Who is calling; sent as a compact JSON User-Agent like the upstream library does."""

    system: str = "arcflow"
    version: str = ""
    commit_sha: str = ""
    scale_set_id: int = 0
    subsystem: str = ""

    def user_agent(self) -> str:
        build = _build_version()
        return json.dumps(
            {
                "system": self.system,
                "version": self.version,
                "commit_sha": self.commit_sha,
                "scale_set_id": self.scale_set_id,
                "subsystem": self.subsystem,
                "build_version": build,
                "build_commit_sha": build,
                "kind": "arcflow",
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class AdminConnection:
    """The ``{svc}`` base and its admin token; ``repr`` shows only ``**********``."""

    service_url: str
    token: SecretStr
    expires_at: datetime

    def needs_refresh(self, now: datetime) -> bool:
        return now + ADMIN_REFRESH_MARGIN > self.expires_at


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _deadline_note(last: bool) -> str:
    """Why a retry loop stopped early: the caller's deadline left no time for the next wait."""
    return "" if last else " (the caller's deadline leaves no time for another)"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ActionsClient:
    """Async client for the Actions scale-set service of one config URL.

    Creating it does no I/O; the first call runs the token chain. Use it as an async context
    manager, or call :meth:`aclose`.
    """

    def __init__(
        self,
        config_url: str,
        credentials: PatCredentials | AppCredentials,
        *,
        system_info: SystemInfo | None = None,
        retry: RetryPolicy | None = None,
        proxy: str | None = None,
        root_ca_pem: str | None = None,
        connection: ServerConnection | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(credentials, PatCredentials | AppCredentials):
            raise TypeError("credentials must be PatCredentials or AppCredentials")
        self._config: GitHubConfig = parse_github_config_url(
            config_url, environ=dict(environ) if environ is not None else None
        )
        self._credentials: Credentials = credentials
        self._system_info = system_info or SystemInfo()
        self._user_agent = self._system_info.user_agent()
        self._retry = retry or RetryPolicy()
        self._admin: AdminConnection | None = None
        self._refresh_lock = asyncio.Lock()  # binds to a loop on first contended use
        self._secrets: dict[str, None] = {}
        if isinstance(credentials, PatCredentials):
            self._remember_secret(credentials.token.get_secret_value())
        else:
            self._remember_secret(credentials.private_key.get_secret_value())
        # The GitHub server's CA and proxy (``connection``: an ARS's githubServerTLS and
        # proxy) win over the environment, as upstream's controllers do
        # (docs/upstream-behaviour.md#actions-connection).
        connection = connection or ServerConnection()
        ca = connection.root_ca_pem or root_ca_pem
        verify: ssl.SSLContext | bool = server_ssl_context(ca) if ca else True
        for password in connection.proxy_passwords():
            self._remember_secret(password)
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            proxy=proxy,
            verify=verify,
            transport=transport,
            mounts=connection.proxy_mounts(verify) or None,
            trust_env=not connection.has_proxy,
            follow_redirects=False,
        )
        # Upstream sends no Accept header except on GET {mq}; httpx would add "*/*".
        self._http.headers.pop("Accept", None)

    # ----------------------------------------------------------------- lifecycle and identity

    @property
    def config(self) -> GitHubConfig:
        return self._config

    @property
    def system_info(self) -> SystemInfo:
        return self._system_info

    @property
    def user_agent(self) -> str:
        return self._user_agent

    def set_scale_set_id(self, id: int) -> None:
        """Record the scale set this client serves; it shows up in the User-Agent."""
        self._system_info = replace(self._system_info, scale_set_id=id)
        self._user_agent = self._system_info.user_agent()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ActionsClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        kind = "app" if isinstance(self._credentials, AppCredentials) else "pat"
        return f"ActionsClient(config_url={self._config.url!r}, auth={kind!r})"

    # ----------------------------------------------------------------------------- secrets

    def _remember_secret(self, value: str) -> None:
        """Known secrets are scrubbed from every error text built from a response body."""
        if not value:
            return
        self._secrets.pop(value, None)
        self._secrets[value] = None
        while len(self._secrets) > MAX_REMEMBERED_SECRETS:
            self._secrets.pop(next(iter(self._secrets)))

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    # ------------------------------------------------------------------------- HTTP layer

    async def _send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        extra_retry_statuses: frozenset[int] = frozenset(),
        github_api: bool = False,
    ) -> httpx.Response:
        """Send with retries. Returns the first non-retryable response (any status).

        Raises :class:`RetriesExhaustedError` when every attempt got a retryable status or a
        transport error, :class:`ActionsError` (status 0) for a non-retryable transport error.
        """
        attempts = self._retry.max_attempts
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            try:
                response = await self._http.request(method, url, headers=headers, content=content)
            except httpx.TransportError as exc:
                reason = self._redact(_describe(exc))
                if not is_retryable_error(exc):
                    raise ActionsError(
                        f"request {method} {url} failed: {reason}",
                        method=method,
                        url=url,
                        message=reason,
                    ) from exc
                wait = self._retry.wait_for(attempt)
                if last or out_of_time(wait):
                    error = RetriesExhaustedError(
                        f"{method} {url} giving up after {attempt + 1} attempt(s)"
                        f"{_deadline_note(last)}: {reason}",
                        method=method,
                        url=url,
                        message=reason,
                    )
                    error.attempts = attempt + 1
                    raise error from exc
                logger.warning(
                    "retrying %s %s after %s (attempt %d of %d, waiting %.1fs)",
                    method, url, reason, attempt + 1, attempts, wait,
                )  # fmt: skip
                await self._retry.sleep(wait)
                continue
            status = response.status_code
            logger.debug("%s %s -> %d", method, url, status)
            if not is_retryable_status(status, extra_retry_statuses):
                return response
            wait = self._retry.wait_for(
                attempt, status=status, retry_after=response.headers.get("Retry-After")
            )
            if last or out_of_time(wait):
                if status in extra_retry_statuses:
                    return response  # runner-registration: the caller reports the last body
                exhausted = self._error(
                    response,
                    github_api=github_api,
                    prefix=f"giving up after {attempt + 1} attempt(s){_deadline_note(last)}",
                    force_class=RetriesExhaustedError,
                )
                assert isinstance(exhausted, RetriesExhaustedError)
                exhausted.attempts = attempt + 1
                raise exhausted
            logger.warning(
                "retrying %s %s after status %d (attempt %d of %d, waiting %.1fs)",
                method, url, status, attempt + 1, attempts, wait,
            )  # fmt: skip
            await self._retry.sleep(wait)
        raise AssertionError("unreachable: the retry loop always returns or raises")

    def _error(
        self,
        response: httpx.Response,
        *,
        github_api: bool = False,
        prefix: str = "",
        status_overrides: dict[int, type[ActionsError]] | None = None,
        force_class: type[ActionsError] | None = None,
    ) -> ActionsError:
        request = response.request
        error = error_from_response(
            method=request.method,
            url=str(request.url),
            status=response.status_code,
            content_type=response.headers.get("Content-Type", ""),
            body=response.content,
            activity_id=response.headers.get("ActivityId", ""),
            request_id=response.headers.get("X-GitHub-Request-Id", ""),
            github_api=github_api,
            status_overrides=status_overrides,
            prefix=prefix,
            secrets=self._secrets,
        )
        if force_class is not None and type(error) is not force_class:
            return force_class(
                str(error),
                status=error.status,
                activity_id=error.activity_id,
                request_id=error.request_id,
                type_name=error.type_name,
                message=error.message,
                method=error.method,
                url=error.url,
            )
        return error

    @staticmethod
    def _ambiguous(response: httpx.Response, detail: str) -> AmbiguousResultError:
        """Several entries where one was asked for: the status and ids of that answer."""
        request = response.request
        return ambiguous_result(
            method=request.method,
            url=str(request.url),
            status=response.status_code,
            activity_id=response.headers.get("ActivityId", ""),
            request_id=response.headers.get("X-GitHub-Request-Id", ""),
            detail=detail,
        )

    def _decode(self, response: httpx.Response) -> Any:
        try:
            return decode_json(response.content)
        except InvalidResponseError as exc:
            request = response.request
            raise InvalidResponseError(
                f"request {request.method} {request.url} returned {response.status_code}: {exc}"
            ) from None

    # ------------------------------------------------------------------------- token chain

    def _github_headers(self, authorization: str, content_type: str) -> dict[str, str]:
        return {
            "Authorization": authorization,
            "Content-Type": content_type,
            "User-Agent": self._user_agent,
        }

    async def _installation_token(self, credentials: AppCredentials) -> str:
        app_jwt = create_app_jwt(credentials)
        self._remember_secret(app_jwt)
        url = (
            f"{self._config.api_base}/app/installations/{credentials.installation_id}/access_tokens"
        )
        response = await self._send(
            "POST",
            url,
            headers=self._github_headers(f"Bearer {app_jwt}", "application/vnd.github+json"),
            github_api=True,
        )
        if response.status_code != 201:
            raise self._error(
                response,
                github_api=True,
                prefix=f"failed to get access token for GitHub App auth ({response.status_code})",
            )
        token = self._token_field(response, "token", "installation access token")
        self._remember_secret(token)
        return token

    def _token_field(self, response: httpx.Response, key: str, what: str) -> str:
        data = self._decode(response)
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value:
            raise InvalidResponseError(f"{what} response has no {key!r}")
        return value

    async def _registration_token(self) -> str:
        if isinstance(self._credentials, AppCredentials):
            bearer = await self._installation_token(self._credentials)
        else:
            bearer = self._credentials.token.get_secret_value()
        url = self._config.api_base + self._config.registration_token_path
        response = await self._send(
            "POST",
            url,
            headers=self._github_headers(f"Bearer {bearer}", "application/vnd.github.v3+json"),
            github_api=True,
        )
        if response.status_code != 201:
            raise self._error(
                response,
                github_api=True,
                prefix=f"failed to get runner registration token ({response.status_code})",
            )
        token = self._token_field(response, "token", "registration token")
        self._remember_secret(token)
        return token

    async def _fetch_admin_connection(self) -> AdminConnection:
        registration_token = await self._registration_token()
        url = f"{self._config.api_base}/actions/runner-registration"
        body = _json_bytes({"url": self._config.url, "runner_event": "register"}) + b"\n"
        response = await self._send(
            "POST",
            url,
            headers=self._github_headers(f"RemoteAuth {registration_token}", "application/json"),
            content=body,
            extra_retry_statuses=_REGISTRATION_RETRY_EXTRA,
            github_api=True,
        )
        if not 200 <= response.status_code < 300:
            raise self._error(
                response,
                github_api=True,
                prefix="failed to get actions service admin connection",
            )
        data = self._decode(response)
        if not isinstance(data, dict):
            raise InvalidResponseError("actions service admin connection is not a JSON object")
        service_url = data.get("url")
        token = data.get("token")
        if not isinstance(service_url, str) or not service_url:
            raise InvalidResponseError("actions service admin connection missing url")
        if not isinstance(token, str) or not token:
            raise InvalidResponseError("actions service admin connection missing token")
        self._remember_secret(token)
        try:
            expires_at = read_jwt_expiry(token)
        except ValueError as exc:
            raise InvalidResponseError(f"actions service admin token: {exc}") from None
        return AdminConnection(service_url, SecretStr(token), expires_at)

    async def _admin_connection(self) -> AdminConnection:
        """The current admin connection, refreshed first when it expires within 60 s.

        A failed refresh keeps the previous connection and fails the calling request.
        """
        current = self._admin
        if current is not None and not current.needs_refresh(_utcnow()):
            return current
        async with self._refresh_lock:
            current = self._admin
            if current is not None and not current.needs_refresh(_utcnow()):
                return current
            fresh = await self._fetch_admin_connection()
            self._admin = fresh
            logger.info(
                "actions service admin connection %s (service %s, token expires %s)",
                "refreshed" if current is not None else "established",
                httpx.URL(fresh.service_url).host,
                fresh.expires_at.isoformat(),
            )
            return fresh

    # ----------------------------------------------------------------------- {svc} requests

    async def _service_request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        body: Any = None,
        expected: frozenset[int] = frozenset({200}),
        token: SecretStr | None = None,
        status_overrides: dict[int, type[ActionsError]] | None = None,
    ) -> httpx.Response:
        connection = await self._admin_connection()
        url = build_service_url(connection.service_url, path, query)
        bearer = (token or connection.token).get_secret_value()
        headers = {
            "Authorization": f"Bearer {bearer}",
            "Content-Type": "application/json",
            "User-Agent": self._user_agent,
        }
        content = None if body is None else _json_bytes(body)
        response = await self._send(method, url, headers=headers, content=content)
        if response.status_code not in expected:
            raise self._error(response, status_overrides=status_overrides)
        return response

    def _list_value(self, response: httpx.Response, what: str) -> tuple[int, list[Any]]:
        data = self._decode(response)
        if not isinstance(data, dict):
            raise InvalidResponseError(f"{what} response is not a JSON object")
        count = data.get("count") or 0
        value = data.get("value") or []
        if not isinstance(count, int) or not isinstance(value, list):
            raise InvalidResponseError(f"{what} response has a malformed count or value")
        return count, value

    async def get_runner_group_by_name(self, name: str) -> RunnerGroup:
        """E1. Exactly one group must match; 0 or several is an error."""
        response = await self._service_request("GET", RUNNER_GROUPS_PATH, query={"groupName": name})
        count, value = self._list_value(response, "runner group list")
        if count == 0:
            raise RunnerGroupNotFoundError(f"no runner group found with name {name!r}")
        if count > 1:
            raise self._ambiguous(response, f"multiple runner group found with name {name!r}")
        if not value:
            raise InvalidResponseError("runner group list has count 1 but no value")
        return validate_wire(RunnerGroup, value[0], "RunnerGroup")

    async def get_runner_scale_set(self, runner_group_id: int, name: str) -> RunnerScaleSet | None:
        """E2. Decided by ``count``: 0 is ``None``, 1 the scale set, more an error."""
        response = await self._service_request(
            "GET", SCALE_SETS_PATH, query={"runnerGroupId": runner_group_id, "name": name}
        )
        count, value = self._list_value(response, "runner scale set list")
        if count == 0:
            return None
        if count > 1:
            raise self._ambiguous(response, f"multiple runner scale sets found with name {name!r}")
        if not value:
            raise InvalidResponseError("runner scale set list has count 1 but no value")
        return validate_wire(RunnerScaleSet, value[0], "RunnerScaleSet")

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet | None:
        """E3. A ``null`` body is ``None``; 404 raises :class:`ScaleSetNotFoundError`."""
        response = await self._service_request(
            "GET",
            scale_set_path(scale_set_id),
            status_overrides={404: ScaleSetNotFoundError},
        )
        data = self._decode(response)
        return None if data is None else validate_wire(RunnerScaleSet, data, "RunnerScaleSet")

    async def create_runner_scale_set(self, scale_set: RunnerScaleSet) -> RunnerScaleSet:
        """E4 (200). Labels are defaulted first; no name and no labels fails before any I/O."""
        prepared = ensure_scale_set_labels(scale_set)
        response = await self._service_request(
            "POST", SCALE_SETS_PATH, body=prepared.to_request_body()
        )
        return validate_wire(RunnerScaleSet, self._decode(response), "RunnerScaleSet")

    async def update_runner_scale_set(
        self, scale_set_id: int, scale_set: RunnerScaleSet
    ) -> RunnerScaleSet:
        """E5: a partial update; zero fields are left out of the body (``RunnerSetting`` stays)."""
        prepared = scale_set.model_copy(
            update={"labels": with_default_label_types(list(scale_set.labels))}
        )
        response = await self._service_request(
            "PATCH",
            scale_set_path(scale_set_id),
            body=prepared.to_request_body(),
            status_overrides={404: ScaleSetNotFoundError},
        )
        return validate_wire(RunnerScaleSet, self._decode(response), "RunnerScaleSet")

    async def delete_runner_scale_set(self, scale_set_id: int) -> None:
        """E6 (204)."""
        await self._service_request(
            "DELETE",
            scale_set_path(scale_set_id),
            expected=frozenset({204}),
            status_overrides={404: ScaleSetNotFoundError},
        )

    def _validated_session(self, response: httpx.Response) -> MessageSession:
        session = validate_wire(MessageSession, self._decode(response), "MessageSession")
        if not session.session_id:
            raise InvalidResponseError("message session has no sessionId")
        if is_nil_session_id(session.session_id):
            # Upstream's listener refuses it too: no session could be polled or deleted by it.
            request = response.request
            raise NilSessionError(
                f"request {request.method} {request.url} returned a message session whose "
                "sessionId is the nil UUID; refused"
            )
        scheme = httpx.URL(session.message_queue_url).scheme if session.message_queue_url else ""
        if scheme not in ("http", "https"):
            raise InvalidResponseError(
                "message session has an empty or non-HTTP messageQueueUrl"
                if session.message_queue_url
                else "message session has an empty messageQueueUrl"
            )
        self._remember_secret(session.message_queue_access_token.get_secret_value())
        return session

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession:
        """E7 (200). 409 -> :class:`SessionConflictError`; 404 -> :class:`ScaleSetNotFoundError`."""
        response = await self._service_request(
            "POST",
            scale_set_path(scale_set_id, "sessions"),
            body={"ownerName": owner},
            status_overrides={409: SessionConflictError, 404: ScaleSetNotFoundError},
        )
        return self._validated_session(response)

    async def refresh_message_session(self, scale_set_id: int, session_id: str) -> MessageSession:
        """E8 (200): a new message-queue token for the same session; replaces the whole session."""
        response = await self._service_request(
            "PATCH", scale_set_path(scale_set_id, "sessions", escape_segment(session_id))
        )
        return self._validated_session(response)

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None:
        """E9 (204)."""
        await self._service_request(
            "DELETE",
            scale_set_path(scale_set_id, "sessions", escape_segment(session_id)),
            expected=frozenset({204}),
        )

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[JobAvailable]:
        """E13: 200 with a list, or 204 meaning none."""
        response = await self._service_request(
            "GET",
            scale_set_path(scale_set_id, "acquirablejobs"),
            expected=frozenset({200, 204}),
        )
        if response.status_code == 204:
            return []
        _count, value = self._list_value(response, "acquirable job list")
        jobs: list[JobAvailable] = []
        for item in value:
            if not isinstance(item, dict):
                raise InvalidResponseError("acquirable job entry is not a JSON object")
            fields = {k: v for k, v in item.items() if str(k).lower() != "messagetype"}
            jobs.append(validate_wire(JobAvailable, fields, "JobAvailable"))
        return jobs

    async def generate_jit_runner_config(
        self, scale_set_id: int, name: str, work_folder: str = ""
    ) -> JitRunnerConfig:
        """E14 (200). 409 ``AgentExistsException`` -> :class:`RunnerExistsError`."""
        response = await self._service_request(
            "POST",
            scale_set_path(scale_set_id, "generatejitconfig"),
            body={"name": name, "workFolder": work_folder},
            status_overrides={404: ScaleSetNotFoundError},
        )
        config = validate_wire(JitRunnerConfig, self._decode(response), "JitRunnerConfig")
        self._remember_secret(config.encoded_jit_config.get_secret_value())
        return config

    async def get_runner(self, runner_id: int) -> RunnerReference | None:
        """E15. A ``null`` body is ``None``; 404 raises :class:`RunnerNotFoundError`."""
        response = await self._service_request(
            "GET", f"{AGENTS_PATH}/{runner_id}", status_overrides={404: RunnerNotFoundError}
        )
        data = self._decode(response)
        return None if data is None else validate_wire(RunnerReference, data, "RunnerReference")

    async def get_runner_by_name(self, name: str) -> RunnerReference | None:
        """E16. Decided by ``count``: 0 is ``None``, 1 the runner, more an error."""
        response = await self._service_request("GET", AGENTS_PATH, query={"agentName": name})
        count, value = self._list_value(response, "runner list")
        if count == 0:
            return None
        if count > 1:
            raise self._ambiguous(response, f"multiple runners found with name {name!r}")
        if not value:
            raise InvalidResponseError("runner list has count 1 but no value")
        return validate_wire(RunnerReference, value[0], "RunnerReference")

    async def list_runners(self) -> list[RunnerReference]:
        """E16 without a name: every runner the service knows (the orphan scan filters by
        scale set; docs/upstream-behaviour.md#runner-listing)."""
        response = await self._service_request("GET", AGENTS_PATH)
        _count, value = self._list_value(response, "runner list")
        return [validate_wire(RunnerReference, item, "RunnerReference") for item in value or []]

    async def remove_runner(self, runner_id: int) -> None:
        """E17 (204). Busy: :class:`JobStillRunningError`; unknown: :class:`RunnerNotFoundError`."""
        await self._service_request(
            "DELETE",
            f"{AGENTS_PATH}/{runner_id}",
            expected=frozenset({204}),
            status_overrides={404: RunnerNotFoundError},
        )

    # ---------------------------------------------------------- message queue (MQ token) calls

    async def mq_get_message(
        self, session: MessageSession, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        """E10 once, with the session's token: 200 message, 202 none, 401 token expired."""
        url = build_message_url(session.message_queue_url, last_message_id)
        headers = {
            "Authorization": f"Bearer {session.message_queue_access_token.get_secret_value()}",
            "Accept": f"application/json; api-version={API_VERSION}",
            "User-Agent": self._user_agent,
            "X-ScaleSetMaxCapacity": str(max_capacity),
        }
        response = await self._send("GET", url, headers=headers)
        if response.status_code == 202:
            return None
        if response.status_code != 200:
            raise self._error(response, status_overrides={401: MessageQueueTokenExpiredError})
        try:
            return parse_runner_scale_set_message(response.content)
        except InvalidResponseError as exc:
            raise InvalidResponseError(f"request GET {url} returned 200: {exc}") from None

    async def mq_delete_message(self, session: MessageSession, message_id: int) -> None:
        """E11 once: only 204 is success (200 is an error, as upstream)."""
        url = build_delete_message_url(session.message_queue_url, message_id)
        headers = {
            "Authorization": f"Bearer {session.message_queue_access_token.get_secret_value()}",
            "Content-Type": "application/json",
            "User-Agent": self._user_agent,
        }
        response = await self._send("DELETE", url, headers=headers)
        if response.status_code != 204:
            raise self._error(response, status_overrides={401: MessageQueueTokenExpiredError})

    async def mq_acquire_jobs(
        self, scale_set_id: int, session: MessageSession, request_ids: list[int]
    ) -> list[int]:
        """E12 once: a ``{svc}`` URL, but authorized by the message-queue token."""
        response = await self._service_request(
            "POST",
            scale_set_path(scale_set_id, "acquirejobs"),
            body=[int(i) for i in request_ids],
            token=session.message_queue_access_token,
            status_overrides={401: MessageQueueTokenExpiredError},
        )
        _count, value = self._list_value(response, "acquire jobs")
        try:
            return [int(i) for i in value]
        except (TypeError, ValueError):
            raise InvalidResponseError("acquire jobs response holds a non-integer id") from None

    def message_session(
        self, scale_set_id: int, owner: str, *, retry_conflict: ConflictRetry | None = None
    ) -> MessageSessionClient:
        """A session client for one scale set; open it with ``async with``."""
        from arcflow.common.actions.session import MessageSessionClient

        return MessageSessionClient(self, scale_set_id, owner, retry_conflict=retry_conflict)
