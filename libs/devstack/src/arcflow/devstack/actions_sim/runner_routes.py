"""The runner's own side of the simulated Actions service (ADR 0091, docs/actions-simulator.md,
"The runner's side"): what a runner process does with nothing but its JIT config.

1. ``POST {svc}_apis/oauth2/token`` with the client id and secret of the JIT config's
   ``.credentials`` (form or JSON, ``grant_type=client_credentials``) -> a runner token;
2. ``POST {svc}_apis/distributedtask/pools/{pool}/sessions`` -> ``{sessionId, agent}``: the
   runner is online and idle, and takes its scale set's oldest assigned job (``JobStarted``);
3. ``GET .../pools/{pool}/messages?sessionId=`` long-polls: 200 ``RunnerJobRequest`` once the
   runner holds a job (the body, a JSON string, says what the job is and how long it runs), else
   202 after the poll timeout; ``DELETE .../messages/{id}?sessionId=`` acknowledges it;
4. ``POST {svc}_apis/runner/jobs/{jobId}/complete`` ``{result}`` -> ``JobCompleted``, and the
   ephemeral runner is gone;
5. ``DELETE .../pools/{pool}/sessions/{sid}`` -> 204: the runner is offline (an idle one takes
   no job until it opens a session again).

The shape follows GitHub's runner (a token from its credentials, a session, a message with its
job, a completion); the paths and bodies are ours, not the real service's. A call with a token
of another runner, or of a runner that is gone, is 401.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from aiohttp import web

from arcflow.devstack.actions_sim.jit import JitConfigError
from arcflow.devstack.actions_sim.model import Runner, ServiceError, TypeNames, lower_keys
from arcflow.devstack.actions_sim.service_routes import SVC_PREFIX
from arcflow.devstack.actions_sim.wire import (
    bearer_token,
    empty_response,
    json_response,
    query_value,
)

if TYPE_CHECKING:
    from arcflow.devstack.actions_sim.core import SimulatorCore

_POOL = SVC_PREFIX + "_apis/distributedtask/pools/{pool:\\d+}"
JOB_REQUEST = "RunnerJobRequest"


class RunnerRoutes:
    def __init__(self, sim: SimulatorCore) -> None:
        self.sim = sim
        self.engine = sim.engine
        self.tokens = sim.tokens

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_post(SVC_PREFIX + "_apis/oauth2/token", self.token)
        r.add_post(_POOL + "/sessions", self.create_session)
        r.add_delete(_POOL + "/sessions/{sid}", self.delete_session)
        r.add_get(_POOL + "/messages", self.get_message)
        r.add_delete(_POOL + "/messages/{mid:\\d+}", self.delete_message)
        r.add_post(SVC_PREFIX + "_apis/runner/jobs/{job_id}/complete", self.complete)

    # --- auth ----------------------------------------------------------------------------
    async def token(self, request: web.Request) -> web.Response:
        raw = (await request.read()).decode(errors="replace")
        fields: dict[str, Any]
        if request.content_type == "application/json":
            try:
                loaded = json.loads(raw or "{}")
            except ValueError:
                loaded = None
            fields = lower_keys(loaded) if isinstance(loaded, dict) else {}
        else:
            fields = {k.lower(): v[0] for k, v in parse_qs(raw).items()}
        if fields.get("grant_type") != "client_credentials":
            raise ServiceError(400, TypeNames.ARGUMENT, "grant_type must be client_credentials")
        runner = self.engine.runner_by_credentials(
            str(fields.get("client_id", "")), str(fields.get("client_secret", ""))
        )
        if runner is None:
            raise _unauthorized("The runner's credentials are not valid (removed or finished?).")
        token = self.tokens.issue_runner_token(runner.id)
        expires = int(self.tokens.admin_token_ttl)
        return json_response({"access_token": token, "token_type": "bearer", "expires_in": expires})

    def _runner(self, request: web.Request) -> Runner:
        token = bearer_token(request)
        claims = None if token is None else self.tokens.verify(token, "runner")
        runner = None if claims is None else self.engine.runners.get(int(claims["rid"]))
        if runner is None:
            raise _unauthorized("The runner token is missing, expired or its runner is gone.")
        return runner

    def _session_runner(self, request: web.Request) -> Runner:
        runner = self._runner(request)
        session_id = query_value(request, "sessionId") or request.match_info.get("sid")
        if runner.session_id is None or session_id != runner.session_id:
            raise ServiceError(404, TypeNames.SESSION_NOT_FOUND, "No such runner session.")
        return runner

    # --- session and messages -------------------------------------------------------------
    async def create_session(self, request: web.Request) -> web.Response:
        runner = self._runner(request)
        session_id = self.engine.open_runner_session(runner)
        agent = {"id": runner.id, "name": runner.name}
        return json_response({"sessionId": session_id, "agent": agent})

    async def delete_session(self, request: web.Request) -> web.Response:
        self.engine.close_runner_session(self._session_runner(request))
        return empty_response(204)

    async def get_message(self, request: web.Request) -> web.Response:
        runner = self._session_runner(request)
        try:
            job_id = runner.job_id or await self.engine.wait_for_runner_job(
                runner.id, self.sim.poll_timeout
            )
        except JitConfigError:
            raise _unauthorized("The runner is gone (removed).") from None
        if job_id is None:
            return empty_response(202)
        job = self.engine.job(job_id)
        body = {
            "jobId": job.job_id,
            "runnerRequestId": job.runner_request_id,
            "jobDisplayName": job.display_name,
            "repositoryName": job.repository,
            "ownerName": job.owner,
            "jobWorkflowRef": job.workflow_ref,
            "duration": job.duration,
            "result": job.result,
        }
        message = {"messageId": job.runner_request_id, "messageType": JOB_REQUEST}
        return json_response({**message, "body": json.dumps(body)})

    async def delete_message(self, request: web.Request) -> web.Response:
        self._session_runner(request)
        return empty_response(204)

    async def complete(self, request: web.Request) -> web.Response:
        runner = self._runner(request)
        raw = await request.read()
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ServiceError(400, TypeNames.ARGUMENT, "the body must be a JSON object")
        result = str(lower_keys(data).get("result") or "succeeded")
        try:
            job = self.engine.finish_runner_job(runner, request.match_info["job_id"], result)
        except KeyError:
            raise ServiceError(404, TypeNames.ARGUMENT, "No such job.") from None
        return json_response({"jobId": job.job_id, "result": job.final_result})


def _unauthorized(message: str) -> ServiceError:
    return ServiceError(401, TypeNames.UNAUTHORIZED, message)


__all__ = ["JOB_REQUEST", "RunnerRoutes"]
