"""GitHub REST and Actions service routes (docs/upstream-behaviour.md#actions-auth): exact paths,
statuses and bodies."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from arcflow.devstack.actions_sim.model import (
    DroppedConnectionError,
    ServiceError,
    Session,
    TypeNames,
    count_list,
    lower_keys,
    message_envelope,
)
from arcflow.devstack.actions_sim.wire import (
    bearer_token,
    empty_response,
    github_credential,
    github_error_response,
    json_response,
    query_int,
    query_value,
    read_json,
)

if TYPE_CHECKING:
    from arcflow.devstack.actions_sim.core import SimulatorCore

NIL_SESSION_ID = "00000000-0000-0000-0000-000000000000"
SVC_PREFIX = "/tenant/1/"
_SETS = SVC_PREFIX + "_apis/runtime/runnerscalesets"
_AGENTS = SVC_PREFIX + "_apis/distributedtask/pools/0/agents"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _unauthorized(message: str) -> ServiceError:
    return ServiceError(401, TypeNames.UNAUTHORIZED, message)


class ServiceRoutes:
    """Handlers bound to one simulator; auth is checked per token kind on every route."""

    def __init__(self, sim: SimulatorCore) -> None:
        self.sim = sim
        self.engine = sim.engine
        self.tokens = sim.tokens

    def register(self, app: web.Application) -> None:
        r = app.router
        api = "/api/v3"
        r.add_post(api + "/app/installations/{iid}/access_tokens", self.access_token)
        r.add_post(api + "/orgs/{org}/actions/runners/registration-token", self.reg_token)
        r.add_post(api + "/repos/{owner}/{repo}/actions/runners/registration-token", self.reg_token)
        r.add_post(api + "/enterprises/{ent}/actions/runners/registration-token", self.reg_token)
        r.add_post(api + "/actions/runner-registration", self.runner_registration)
        r.add_get(SVC_PREFIX + "_apis/runtime/runnergroups/", self.runner_groups)
        r.add_get(SVC_PREFIX + "_apis/runtime/runnergroups", self.runner_groups)
        r.add_get(_SETS, self.find_scale_sets)
        r.add_post(_SETS, self.create_scale_set)
        r.add_get(_SETS + "/{id:\\d+}", self.get_scale_set)
        r.add_patch(_SETS + "/{id:\\d+}", self.update_scale_set)
        r.add_delete(_SETS + "/{id:\\d+}", self.delete_scale_set)
        r.add_post(_SETS + "/{id:\\d+}/sessions", self.create_session)
        r.add_patch(_SETS + "/{id:\\d+}/sessions/{sid}", self.refresh_session)
        r.add_delete(_SETS + "/{id:\\d+}/sessions/{sid}", self.delete_session)
        r.add_get(_SETS + "/{id:\\d+}/messages", self.get_message)
        r.add_delete(_SETS + "/{id:\\d+}/messages/{mid:\\d+}", self.delete_message)
        r.add_post(_SETS + "/{id:\\d+}/acquirejobs", self.acquire_jobs)
        r.add_get(_SETS + "/{id:\\d+}/acquirablejobs", self.acquirable_jobs)
        r.add_post(_SETS + "/{id:\\d+}/generatejitconfig", self.generate_jit_config)
        r.add_get(_AGENTS, self.find_runners)
        r.add_get(_AGENTS + "/{rid:\\d+}", self.get_runner)
        r.add_delete(_AGENTS + "/{rid:\\d+}", self.remove_runner)

    # --- auth ----------------------------------------------------------------------------
    def _admin(self, request: web.Request) -> None:
        token = bearer_token(request)
        if token is None or self.tokens.verify(token, "admin") is None:
            raise _unauthorized("The admin token is missing, expired or not valid here.")

    def _mq_session(self, request: web.Request) -> Session:
        """The session of a valid MQ token for the scale set in the path; 401 otherwise."""
        if self.sim.faults.take_mq_expiry():
            raise _unauthorized("The message queue token has expired.")
        token = bearer_token(request)
        claims = None if token is None else self.tokens.verify(token, "mq")
        session = None if claims is None else self.engine.session_for_token(claims)
        if session is None or session.scale_set_id != int(request.match_info["id"]):
            raise _unauthorized("The message queue token is missing, expired or revoked.")
        return session

    # --- GitHub REST ---------------------------------------------------------------------
    async def access_token(self, request: web.Request) -> web.Response:
        try:
            installation_id = int(request.match_info["iid"])
        except ValueError:
            return github_error_response(404, "Not Found")
        token = bearer_token(request, "bearer")
        if token is None:
            return github_error_response(401, "A JSON web token could not be decoded")
        problem = self.tokens.verify_app_jwt(token, installation_id)
        if problem == "Not Found":
            return github_error_response(404, problem)
        if problem is not None:
            return github_error_response(401, problem)
        value, expires = self.tokens.issue_installation_token()
        return json_response({"token": value, "expires_at": _iso(expires)}, 201)

    async def reg_token(self, request: web.Request) -> web.Response:
        token = github_credential(request)
        principal = None if token is None else self.tokens.github_principal(token)
        if principal is None:
            return github_error_response(401, "Bad credentials")
        if principal == "installation" and "ent" in request.match_info:
            return github_error_response(403, "Resource not accessible by integration")
        value, expires = self.tokens.issue_registration_token(request.path)
        return json_response({"token": value, "expires_at": _iso(expires)}, 201)

    async def runner_registration(self, request: web.Request) -> web.Response:
        token = bearer_token(request, "remoteauth")
        if token is None or not self.tokens.registration_token_valid(token):
            return github_error_response(401, "Bad credentials")
        body = await read_json(request)
        url = lower_keys(body).get("url") if isinstance(body, dict) else None
        if not isinstance(url, str) or not url:
            return github_error_response(400, "url is required")
        admin = self.tokens.issue_admin_token()
        return json_response({"url": self.sim.svc_url, "token": admin}, 201)

    # --- runner groups and scale sets ----------------------------------------------------
    async def runner_groups(self, request: web.Request) -> web.Response:
        self._admin(request)
        name = query_value(request, "groupName")
        groups = self.engine.find_groups(name) if name is not None else self.engine.groups.values()
        return json_response(count_list(g.to_wire(self.engine.group_size(g.id)) for g in groups))

    async def find_scale_sets(self, request: web.Request) -> web.Response:
        self._admin(request)
        group_id = query_int(request, "runnerGroupId", 0)
        name = query_value(request, "name")
        if name is None:
            found = [
                s
                for s in self.engine.scale_sets.values()
                if not group_id or s.runner_group_id == group_id
            ]
        else:
            found = self.engine.find_scale_sets(group_id, name)
        return json_response(count_list(self.engine.scale_set_wire(s) for s in found))

    async def create_scale_set(self, request: web.Request) -> web.Response:
        self._admin(request)
        scale_set = self.engine.create_scale_set(await read_json(request))
        return json_response(self.engine.scale_set_wire(scale_set), 200)

    def _id(self, request: web.Request) -> int:
        return int(request.match_info["id"])

    async def get_scale_set(self, request: web.Request) -> web.Response:
        self._admin(request)
        return json_response(self.engine.scale_set_wire(self.engine.scale_set(self._id(request))))

    async def update_scale_set(self, request: web.Request) -> web.Response:
        self._admin(request)
        body = await read_json(request)
        scale_set = self.engine.update_scale_set(self._id(request), body)
        return json_response(self.engine.scale_set_wire(scale_set))

    async def delete_scale_set(self, request: web.Request) -> web.Response:
        self._admin(request)
        self.engine.delete_scale_set(self._id(request))
        return empty_response(204)

    # --- sessions ------------------------------------------------------------------------
    def _session_body(self, session: Session) -> dict[str, Any]:
        scale_set = self.engine.scale_set(session.scale_set_id)
        queue_url = (
            ""
            if self.sim.faults.take_empty_queue_url()
            else (
                f"{self.sim.svc_url}_apis/runtime/runnerscalesets/{scale_set.id}/messages"
                f"?sessionId={session.id}&api-version=6.0-preview"
            )
        )
        return {
            "sessionId": session.id,
            "ownerName": session.owner,
            "runnerScaleSet": self.engine.scale_set_wire(scale_set),
            "messageQueueUrl": queue_url,
            "messageQueueAccessToken": self.tokens.issue_mq_token(session.id, scale_set.id),
            "statistics": self.engine.statistics(scale_set.id).to_wire(),
        }

    async def create_session(self, request: web.Request) -> web.Response:
        self._admin(request)
        body = await read_json(request, allow_empty=True)
        owner = lower_keys(body).get("ownername", "") if isinstance(body, dict) else ""
        session = self.engine.create_session(self._id(request), str(owner or ""))
        body = self._session_body(session)
        if self.sim.faults.take_nil_session_id():
            # A broken answer: the nil UUID as the id, and no session left behind for it.
            self.engine.delete_session(session.scale_set_id, session.id)
            body["sessionId"] = NIL_SESSION_ID
            body["messageQueueUrl"] = body["messageQueueUrl"].replace(session.id, NIL_SESSION_ID)
        return json_response(body, 200)

    async def refresh_session(self, request: web.Request) -> web.Response:
        self._admin(request)
        session = self.engine.session(self._id(request), request.match_info["sid"])
        return json_response(self._session_body(session), 200)

    async def delete_session(self, request: web.Request) -> web.Response:
        self._admin(request)
        self.engine.delete_session(self._id(request), request.match_info["sid"])
        return empty_response(204)

    # --- message queue -------------------------------------------------------------------
    async def get_message(self, request: web.Request) -> web.Response:
        session = self._mq_session(request)
        self.engine.scale_set(session.scale_set_id).polls_received += 1
        last_message_id = query_int(request, "lastMessageId", 0)
        raw_capacity = request.headers.get("X-ScaleSetMaxCapacity")
        capacity: int | None = None
        if raw_capacity is not None:
            try:
                capacity = int(raw_capacity)
            except ValueError:
                capacity = -1
            if capacity < 0:
                raise ServiceError(
                    400, TypeNames.ARGUMENT, "X-ScaleSetMaxCapacity must be an integer >= 0"
                )
        if self.sim.faults.poll_delay > 0:
            await asyncio.sleep(self.sim.faults.poll_delay)
        if self.sim.faults.take_dropped_poll():
            await asyncio.sleep(self.sim.faults.drop_after)
            raise DroppedConnectionError()
        if self.sim.faults.take_empty_message_body():
            return web.Response(status=200, body=b"", content_type="application/json")
        found = await self.engine.next_message(
            session, last_message_id, capacity, self.sim.poll_timeout
        )
        if found is None:
            return empty_response(202)
        message, stats = found
        return json_response(message_envelope(message, stats), 200)

    async def delete_message(self, request: web.Request) -> web.Response:
        session = self._mq_session(request)
        self.engine.delete_message(session, int(request.match_info["mid"]))
        return empty_response(204)

    async def acquire_jobs(self, request: web.Request) -> web.Response:
        session = self._mq_session(request)
        body = await read_json(request)
        if not isinstance(body, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in body
        ):
            raise ServiceError(400, TypeNames.ARGUMENT, "expected a JSON array of request ids")
        acquired = self.engine.acquire_jobs(session, body)
        return json_response(count_list(acquired), 200)

    async def acquirable_jobs(self, request: web.Request) -> web.Response:
        self._admin(request)
        scale_set_id = self._id(request)
        jobs = self.engine.acquirable_jobs(scale_set_id)
        if not jobs:
            return empty_response(204)
        url = f"{self.sim.svc_url}_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs"
        return json_response(
            count_list(
                {
                    "acquireJobUrl": url,
                    "messageType": "JobAvailable",
                    "runnerRequestId": j.runner_request_id,
                    "repositoryName": j.repository,
                    "ownerName": j.owner,
                    "jobWorkflowRef": j.workflow_ref,
                    "eventName": j.event,
                    "requestLabels": list(j.labels),
                }
                for j in jobs
            )
        )

    # --- runners -------------------------------------------------------------------------
    async def generate_jit_config(self, request: web.Request) -> web.Response:
        self._admin(request)
        body = await read_json(request)
        runner, encoded = self.engine.generate_jit_config(self._id(request), body)
        return json_response({"runner": runner.to_wire(), "encodedJITConfig": encoded}, 200)

    async def find_runners(self, request: web.Request) -> web.Response:
        self._admin(request)
        name = query_value(request, "agentName")
        runners = (
            self.engine.runners_named(name) if name is not None else self.engine.runners.values()
        )
        return json_response(count_list(r.to_wire() for r in runners))

    async def get_runner(self, request: web.Request) -> web.Response:
        self._admin(request)
        return json_response(self.engine.runner(int(request.match_info["rid"])).to_wire())

    async def remove_runner(self, request: web.Request) -> web.Response:
        self._admin(request)
        self.engine.remove_runner(int(request.match_info["rid"]))
        return empty_response(204)
