"""``SimulatorCore``: the simulator's state and its control API, without HTTP.

:class:`~arcflow.devstack.actions_sim.server.ActionsSimulator` serves it over HTTP; the route
modules (``service_routes``, ``control_routes``) are written against this class, so they do not
import the server that registers them (an import-linter contract keeps it so).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, TypedDict

from arcflow.devstack.actions_sim.engine import ActionsEngine, Mode, RunnerConnection
from arcflow.devstack.actions_sim.faults import FaultBook, FaultRule
from arcflow.devstack.actions_sim.model import Job, JobState, RunnerGroup, TypeNames
from arcflow.devstack.actions_sim.tokens import GitHubAppCredentials, TokenAuthority

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


class SimulatorOptions(TypedDict, total=False):
    """The simulator's behaviour (``SimulatorCore``'s keyword arguments)."""

    poll_timeout: float
    mode: Mode
    session_idle_timeout: float | None
    admin_token_ttl: float
    mq_token_ttl: float
    assign_timeout: float | None


class SimulatorCore:
    """The simulated GitHub + Actions service's state (engine, tokens, faults, request log)
    and the control API the ``/_sim`` routes expose; ``svc_url`` comes from the server."""

    def __init__(
        self,
        poll_timeout: float = 50.0,
        mode: Mode = "direct",
        session_idle_timeout: float | None = None,
        admin_token_ttl: float = 3600.0,
        mq_token_ttl: float = 3600.0,
        assign_timeout: float | None = None,
    ) -> None:
        if poll_timeout < 0:
            raise ValueError("poll_timeout must not be negative")
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

    @property
    def svc_url(self) -> str:
        """The Actions service base handed out by runner-registration (trailing slash)."""
        raise NotImplementedError("served by ActionsSimulator")

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

    def delete_scale_set_behind(self, scale_set_id: int) -> None:
        """Delete a scale set as GitHub does behind the controller's back (an admin, or
        GitHub's clean-up of an unused set): its session, queue and idle runners go, jobs not
        started go back to the queue, jobs running finish. Nothing tells the controller."""
        self.engine.delete_scale_set(scale_set_id, keep_running=True)

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

    def nil_session_id(self, times: int = 1) -> None:
        """The next ``times`` session creates answer 200 with the nil UUID as ``sessionId``;
        the simulator keeps no session for them (a retry is not refused with 409)."""
        if times < 1:
            raise ValueError("times must be at least 1")
        self.faults.nil_session_ids += times

    def drop_polls(self, times: int = 1, after: float = 0.5) -> None:
        """The next ``times`` GET message calls are cut off mid-poll: ``after`` seconds into the
        long poll the simulator closes the connection without an answer (the broker's EOF of
        upstream issue #4488). The request log records them with status 0."""
        if times < 1:
            raise ValueError("times must be at least 1")
        if after < 0:
            raise ValueError("after must not be negative")
        self.faults.dropped_polls += times
        self.faults.drop_after = after

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
