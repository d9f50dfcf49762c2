"""``ActionsSimulator``: the simulated GitHub + Actions service over HTTP, and its control API.

Tests, the contract suite and the dev stack all talk to it over real HTTP; the Python methods
here are the same control API the ``/_sim`` routes expose.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from arcflow.devstack.actions_sim.control_routes import ControlRoutes
from arcflow.devstack.actions_sim.engine import ActionsEngine, Mode, RunnerConnection
from arcflow.devstack.actions_sim.faults import FaultBook, FaultRule
from arcflow.devstack.actions_sim.model import (
    Job,
    JobState,
    RunnerGroup,
    ServiceError,
    TypeNames,
)
from arcflow.devstack.actions_sim.service_routes import SVC_PREFIX, ServiceRoutes
from arcflow.devstack.actions_sim.tokens import GitHubAppCredentials, TokenAuthority
from arcflow.devstack.actions_sim.wire import github_error_response, service_error_response

log = logging.getLogger("arcflow.devstack.actions_sim")

BOM = b"\xef\xbb\xbf"
RUNNER_REGISTRATION_ROUTE = "/api/v3/actions/runner-registration"


@dataclass(frozen=True)
class RequestRecord:
    """One request as the simulator saw it: no headers, no query, so no secret."""

    method: str
    path: str
    status: int
    #: Wall-clock time the answer was sent (``time.time()``): benchmarks build timelines.
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunnerRun:
    runner_id: int
    runner_name: str
    job_id: str
    result: str


class ActionsSimulator:
    """A stateful GitHub + Actions scale-set service on ``host:port`` (0 picks a free port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        poll_timeout: float = 50.0,
        mode: Mode = "direct",
        session_idle_timeout: float | None = None,
        admin_token_ttl: float = 3600.0,
        mq_token_ttl: float = 3600.0,
        assign_timeout: float | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if poll_timeout < 0:
            raise ValueError("poll_timeout must not be negative")
        self.host = host
        self.port = port
        # Served over TLS with this context (a GHES behind a private CA), else plain HTTP.
        self.ssl_context = ssl_context
        self.poll_timeout = poll_timeout
        self.faults = FaultBook()
        self.tokens = TokenAuthority(admin_token_ttl, mq_token_ttl)
        idle = session_idle_timeout if session_idle_timeout is not None else 2 * poll_timeout + 30
        self.engine = ActionsEngine(
            mode=mode,
            svc_url=lambda: self.svc_url,
            session_idle_timeout=idle,
            assign_timeout=assign_timeout,
            faults=self.faults,
        )
        self.requests: deque[RequestRecord] = deque(maxlen=20_000)
        self._runner: web.AppRunner | None = None

    def __repr__(self) -> str:
        return f"ActionsSimulator(base_url={self.base_url!r}, mode={self.engine.mode!r})"

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the simulator is already running")
        app = web.Application(middlewares=[self._middleware])
        ServiceRoutes(self).register(app)
        ControlRoutes(self).register(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("Actions simulator listening on %s (mode %s)", self.base_url, self.engine.mode)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self.engine.shutdown()
        await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- URLs ----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        """The GHES-style REST base clients derive from a config URL on this host."""
        return f"{self.base_url}/api/v3"

    @property
    def svc_url(self) -> str:
        """The Actions service base handed out by runner-registration (trailing slash)."""
        return f"{self.base_url}{SVC_PREFIX}"

    def config_url(self, org: str = "example-org") -> str:
        return f"{self.base_url}/{org}"

    def repo_config_url(self, owner: str = "example-org", repo: str = "repo") -> str:
        return f"{self.base_url}/{owner}/{repo}"

    def enterprise_config_url(self, enterprise: str = "example-enterprise") -> str:
        return f"{self.base_url}/enterprises/{enterprise}"

    # --- HTTP middleware -----------------------------------------------------------------
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        is_control = path.startswith("/_sim")
        rule = None if is_control else self.faults.take(request.method, path)
        try:
            if rule is not None:
                response: web.StreamResponse = self._fault_response(rule, path)
            else:
                response = await handler(request)
        except ServiceError as error:
            response = service_error_response(error)
        except web.HTTPException as error:
            response = web.Response(status=error.status, text=error.text or error.reason)
        if not is_control:
            response.headers["ActivityId"] = str(uuid.uuid4())
            response.headers["X-GitHub-Request-Id"] = uuid.uuid4().hex[:16].upper()
            if self.faults.bom and isinstance(response, web.Response):
                self._prefix_bom(response)
            self.requests.append(RequestRecord(request.method, path, response.status))
            log.debug("%s %s -> %s", request.method, path, response.status)
        return response

    @staticmethod
    def _prefix_bom(response: web.Response) -> None:
        body = response.body
        if isinstance(body, bytes) and body and response.content_type == "application/json":
            response.body = BOM + body

    @staticmethod
    def _fault_response(rule: FaultRule, path: str) -> web.Response:
        if rule.content_type.startswith("text/plain"):
            response = web.Response(status=rule.status, text=rule.message)
        elif rule.type_name is not None:
            error = ServiceError(rule.status, rule.type_name, rule.message)
            response = service_error_response(error)
        elif path.startswith("/api/v3"):
            response = github_error_response(rule.status, rule.message)
        else:
            generic = "GitHub.Services.WebApi.VssServiceException, GitHub.Services.WebApi"
            response = service_error_response(ServiceError(rule.status, generic, rule.message))
        if rule.retry_after is not None:
            response.headers["Retry-After"] = rule.retry_after
        return response

    # --- control API: credentials and groups ---------------------------------------------
    def add_pat(self, token: str | None = None) -> str:
        """Register a personal access token (a fresh random one unless given)."""
        return self.tokens.add_pat(token)

    def add_github_app(self) -> GitHubAppCredentials:
        """Register a GitHub App with one installation; returns its id and generated key."""
        return self.tokens.add_app()

    def add_runner_group(self, name: str) -> RunnerGroup:
        return self.engine.add_runner_group(name)

    # --- control API: settings -----------------------------------------------------------
    def set_admin_token_ttl(self, seconds: float) -> None:
        """Under 60 s makes clients refresh the admin token before every call."""
        if seconds <= 0:
            raise ValueError("admin token TTL must be positive")
        self.tokens.admin_token_ttl = seconds

    def set_mq_token_ttl(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("message queue token TTL must be positive")
        self.tokens.mq_token_ttl = seconds

    def set_poll_timeout(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("poll timeout must not be negative")
        self.poll_timeout = seconds

    def set_assign_timeout(self, seconds: float | None) -> None:
        if seconds is not None and seconds <= 0:
            raise ValueError("assign timeout must be positive (or None to disable)")
        self.engine.assign_timeout = seconds

    def set_session_idle_timeout(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("session idle timeout must be positive")
        self.engine.session_idle_timeout = seconds

    # --- control API: jobs ---------------------------------------------------------------
    def enqueue_job(
        self,
        labels: list[str],
        *,
        repository: str = "repo",
        owner: str = "example-org",
        workflow_ref: str | None = None,
        display_name: str = "build",
        event: str = "push",
        duration: float | None = None,
        result: str = "succeeded",
    ) -> str:
        """Queue a workflow job asking for ``labels``; returns its job id.

        ``duration`` (seconds) makes the job finish by itself with ``result`` once a runner
        started it; ``None`` leaves it running until :meth:`complete_job`.
        """
        job = self.engine.enqueue_job(
            labels,
            repository=repository,
            owner=owner,
            workflow_ref=workflow_ref,
            display_name=display_name,
            event=event,
            duration=duration,
            result=result,
        )
        return job.job_id

    def enqueue_jobs(self, count: int, labels: list[str], **fields: Any) -> list[str]:
        if count < 1:
            raise ValueError("count must be at least 1")
        return [self.enqueue_job(labels, **fields) for _ in range(count)]

    def jobs(self, state: str | None = None) -> list[dict[str, Any]]:
        return [
            j.to_public()
            for j in self.engine.jobs.values()
            if state is None or j.state.value == state
        ]

    def job(self, job_id: str) -> dict[str, Any]:
        return self.engine.job(job_id).to_public()

    def complete_job(self, job_id: str, result: str = "succeeded") -> dict[str, Any]:
        """The job ends with ``result``; its ephemeral runner goes away."""
        return self.engine.complete_job(job_id, result).to_public()

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """The workflow was cancelled (before or after a runner took the job)."""
        return self.engine.cancel_job(job_id).to_public()

    async def wait_for_job_state(
        self, job_id: str, state: str, within: float = 10.0
    ) -> dict[str, Any]:
        job = await self.engine.wait_for_job_state(job_id, {JobState(state)}, within)
        if job is None:
            current = self.engine.job(job_id).state.value
            raise TimeoutError(f"job {job_id} still {current} after {within}s, wanted {state}")
        return job.to_public()

    # --- control API: runners ------------------------------------------------------------
    def connect_runner(self, encoded_jit_config: str) -> RunnerConnection:
        """A runner starts with its JIT config: it goes online-idle and takes a job if any."""
        return self.engine.connect_runner(encoded_jit_config)

    async def run_runner(
        self,
        encoded_jit_config: str,
        job_duration: float = 0.0,
        *,
        result: str = "succeeded",
        job_wait: float = 30.0,
    ) -> RunnerRun:
        """Play one ephemeral runner: connect, wait for a job, run it, complete it."""
        connection = self.engine.connect_runner(encoded_jit_config)
        job_id = connection.job_id or await self.engine.wait_for_runner_job(
            connection.runner_id, job_wait
        )
        if job_id is None:
            raise TimeoutError(f"runner {connection.runner_name} got no job within {job_wait}s")
        if job_duration > 0:
            await asyncio.sleep(job_duration)
        job: Job = self.engine.job(job_id)
        if job.state is JobState.RUNNING and job.runner_id == connection.runner_id:
            self.engine.complete_job(job_id, result)
        return RunnerRun(
            connection.runner_id, connection.runner_name, job_id, job.final_result or result
        )

    # --- control API: faults -------------------------------------------------------------
    def inject_status(
        self,
        route: str,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        retry_after: float | str | None = None,
        content_type: str = "application/json",
        type_name: str | None = None,
        message: str = "fault injected by the simulator",
    ) -> FaultRule:
        """Answer the next ``times`` requests whose path matches the glob ``route``."""
        return self.faults.add(
            FaultRule(
                route=route,
                status=status,
                times=times,
                method=method,
                retry_after=None if retry_after is None else _retry_after(retry_after),
                content_type=content_type,
                type_name=type_name,
                message=message,
            )
        )

    def fail_runner_registration(self, status: int = 401, times: int = 1) -> FaultRule:
        if status not in (401, 403):
            raise ValueError("runner-registration faults are 401 or 403")
        return self.inject_status(
            RUNNER_REGISTRATION_ROUTE, status, times=times, method="POST", message="Bad credentials"
        )

    def conflict_session_create(self, times: int = 1) -> FaultRule:
        return self.inject_status(
            "*/runnerscalesets/*/sessions",
            409,
            times=times,
            method="POST",
            type_name=TypeNames.SESSION_CONFLICT,
            message="The actions runner scaleset already has an active session.",
        )

    def fail_session_refresh(self, times: int = 1) -> FaultRule:
        return self.inject_status(
            "*/runnerscalesets/*/sessions/*",
            404,
            times=times,
            method="PATCH",
            type_name=TypeNames.SESSION_NOT_FOUND,
            message="runner referenced a session ID that doesn't exist",
        )

    def text_plain_errors(self, route: str, times: int = 1, method: str | None = None) -> FaultRule:
        return self.inject_status(
            route,
            400,
            times=times,
            method=method,
            content_type="text/plain",
            message="Bad request (plain text from the simulator)",
        )

    def expire_next_mq_token(self, times: int = 1) -> None:
        """The next ``times`` message-queue calls (E10/E11/E12) answer 401."""
        if times < 1:
            raise ValueError("times must be at least 1")
        self.faults.expire_mq_calls += times

    def empty_message_body(self, times: int = 1) -> None:
        """The next ``times`` GET message calls answer 200 with an empty body."""
        if times < 1:
            raise ValueError("times must be at least 1")
        self.faults.empty_message_bodies += times

    def empty_message_queue_url(self, times: int = 1) -> None:
        """The next ``times`` session create/refresh answers carry an empty messageQueueUrl."""
        if times < 1:
            raise ValueError("times must be at least 1")
        self.faults.empty_queue_urls += times

    def set_bom(self, enabled: bool = True) -> None:
        """Prefix every JSON response body with a UTF-8 byte order mark."""
        self.faults.bom = enabled

    def set_slow_polls(self, delay: float) -> None:
        """Every GET message waits ``delay`` seconds before it is handled."""
        if delay < 0:
            raise ValueError("delay must not be negative")
        self.faults.poll_delay = delay

    def set_zero_runner_request_ids(self, enabled: bool = True) -> None:
        """Direct mode: job messages carry ``runnerRequestId: 0`` as github.com does."""
        self.faults.zero_runner_request_ids = enabled

    def clear_faults(self) -> None:
        self.faults.clear()

    # --- introspection -------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counts for tests: scale sets, live sessions, jobs per state, runners per status."""
        return self.engine.stats()

    def snapshot(self) -> dict[str, Any]:
        """The whole state (no secret inside), with per-scale-set statistics and queues."""
        return self.engine.snapshot()

    def requests_matching(self, route: str = "*", method: str | None = None) -> list[RequestRecord]:
        """Requests seen so far whose path matches the glob (to count retries and refreshes)."""
        probe = FaultRule(route=route, status=500, method=method)
        return [r for r in self.requests if probe.matches(r.method, r.path)]


def _retry_after(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)
