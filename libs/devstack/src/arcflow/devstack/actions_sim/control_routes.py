"""The ``/_sim`` control API over HTTP (JSON, snake_case): the dev stack's handle on the sim.

Each route calls the ``SimulatorCore`` (the simulator's control API) method of the same
purpose. Not authenticated: the simulator only listens where the developer puts it (127.0.0.1
by default).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aiohttp import web

from arcflow.devstack.actions_sim.jit import JitConfigError
from arcflow.devstack.actions_sim.model import ServiceError
from arcflow.devstack.actions_sim.wire import as_mapping, control_error, json_response

if TYPE_CHECKING:
    from arcflow.devstack.actions_sim.core import SimulatorCore

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guard(handler: Handler) -> Handler:
    """Bad input becomes a 400/404/408 with its reason; nothing else breaks."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except KeyError as exc:
            return control_error(404, str(exc.args[0]) if exc.args else "not found")
        except TimeoutError as exc:
            return control_error(408, str(exc))
        except (ValueError, TypeError, JitConfigError) as exc:
            return control_error(400, str(exc))
        except ServiceError as exc:
            return control_error(exc.status, exc.message)

    return wrapped


async def _body(request: web.Request) -> Mapping[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        data = await request.json()
    except ValueError:
        raise ValueError("the request body is not valid JSON") from None
    return as_mapping(data)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number")
    return float(value)


def _int(data: Mapping[str, Any], key: str, default: int) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer")
    return value


def _str(data: Mapping[str, Any], key: str, default: str = "") -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


class ControlRoutes:
    def __init__(self, sim: SimulatorCore) -> None:
        self.sim = sim

    def register(self, app: web.Application) -> None:
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/_sim/health", self.health),
            ("POST", "/_sim/pats", self.add_pat),
            ("POST", "/_sim/apps", self.add_app),
            ("POST", "/_sim/runner-groups", self.add_group),
            ("POST", "/_sim/jobs", self.enqueue),
            ("GET", "/_sim/jobs", self.list_jobs),
            ("GET", "/_sim/jobs/{job_id}", self.get_job),
            ("POST", "/_sim/jobs/{job_id}/complete", self.complete_job),
            ("POST", "/_sim/jobs/{job_id}/cancel", self.cancel_job),
            ("POST", "/_sim/runners/connect", self.connect_runner),
            ("POST", "/_sim/runners/run", self.run_runner),
            ("DELETE", "/_sim/scalesets/{scale_set_id}", self.delete_scale_set),
            ("GET", "/_sim/faults", self.list_faults),
            ("DELETE", "/_sim/faults", self.clear_faults),
            ("POST", "/_sim/faults/{kind}", self.add_fault),
            ("PATCH", "/_sim/settings", self.settings),
            ("GET", "/_sim/stats", self.stats),
            ("GET", "/_sim/snapshot", self.snapshot),
            ("GET", "/_sim/active-peak", self.active_peak),
            ("GET", "/_sim/requests", self.list_requests),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, _guard(handler))

    async def health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok", "mode": self.sim.engine.mode})

    async def add_pat(self, request: web.Request) -> web.Response:
        data = await _body(request)
        token = data.get("token")
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty string")
        return json_response({"token": self.sim.add_pat(token)}, 201)

    async def add_app(self, request: web.Request) -> web.Response:
        return json_response(asdict(self.sim.add_github_app()), 201)

    async def add_group(self, request: web.Request) -> web.Response:
        data = await _body(request)
        group = self.sim.add_runner_group(_str(data, "name"))
        return json_response(group.to_wire(0), 201)

    async def enqueue(self, request: web.Request) -> web.Response:
        data = await _body(request)
        labels = data.get("labels")
        if not isinstance(labels, list):
            raise ValueError("labels must be a list of strings")
        fields: dict[str, Any] = {
            "repository": _str(data, "repository", "repo"),
            "owner": _str(data, "owner", "example-org"),
            "workflow_ref": data.get("workflow_ref"),
            "display_name": _str(data, "display_name", "build"),
            "event": _str(data, "event", "push"),
            "duration": _opt_float(data, "duration"),
            "result": _str(data, "result", "succeeded"),
        }
        if fields["workflow_ref"] is not None and not isinstance(fields["workflow_ref"], str):
            raise ValueError("workflow_ref must be a string")
        job_ids = self.sim.enqueue_jobs(_int(data, "count", 1), labels, **fields)
        return json_response({"job_ids": job_ids}, 201)

    async def list_jobs(self, request: web.Request) -> web.Response:
        return json_response({"jobs": self.sim.jobs(request.query.get("state"))})

    async def get_job(self, request: web.Request) -> web.Response:
        return json_response(self.sim.job(request.match_info["job_id"]))

    async def complete_job(self, request: web.Request) -> web.Response:
        data = await _body(request)
        job = self.sim.complete_job(request.match_info["job_id"], _str(data, "result", "succeeded"))
        return json_response(job)

    async def cancel_job(self, request: web.Request) -> web.Response:
        return json_response(self.sim.cancel_job(request.match_info["job_id"]))

    async def connect_runner(self, request: web.Request) -> web.Response:
        data = await _body(request)
        connection = self.sim.connect_runner(_str(data, "jit_config"))
        return json_response(asdict(connection))

    async def run_runner(self, request: web.Request) -> web.Response:
        data = await _body(request)
        run = await self.sim.run_runner(
            _str(data, "jit_config"),
            _opt_float(data, "job_duration") or 0.0,
            result=_str(data, "result", "succeeded"),
            job_wait=_opt_float(data, "job_wait") or 30.0,
        )
        return json_response(asdict(run))

    async def delete_scale_set(self, request: web.Request) -> web.Response:
        scale_set_id = int(request.match_info["scale_set_id"])  # ValueError: 400
        self.sim.delete_scale_set_behind(scale_set_id)
        return web.json_response({"deleted": scale_set_id})

    async def list_faults(self, request: web.Request) -> web.Response:
        return json_response(self.sim.faults.describe())

    async def clear_faults(self, request: web.Request) -> web.Response:
        self.sim.clear_faults()
        return json_response(self.sim.faults.describe())

    async def add_fault(self, request: web.Request) -> web.Response:
        data = await _body(request)
        kind = request.match_info["kind"]
        times = _int(data, "times", 1)
        sim = self.sim
        if kind == "status":
            retry_after = data.get("retry_after")
            sim.inject_status(
                _str(data, "route"),
                _int(data, "status", 500),
                times=times,
                method=data.get("method"),
                retry_after=retry_after,
                content_type=_str(data, "content_type", "application/json"),
                type_name=data.get("type_name"),
            )
        elif kind == "runner-registration":
            sim.fail_runner_registration(_int(data, "status", 401), times)
        elif kind == "session-conflict":
            sim.conflict_session_create(times)
        elif kind == "session-refresh-404":
            sim.fail_session_refresh(times)
        elif kind == "text-plain":
            sim.text_plain_errors(_str(data, "route"), times, data.get("method"))
        elif kind == "expire-mq-token":
            sim.expire_next_mq_token(times)
        elif kind == "empty-message-body":
            sim.empty_message_body(times)
        elif kind == "empty-queue-url":
            sim.empty_message_queue_url(times)
        elif kind == "nil-session-id":
            sim.nil_session_id(times)
        elif kind == "drop-polls":
            sim.drop_polls(times, _opt_float(data, "after") or 0.5)
        elif kind == "bom":
            sim.set_bom(bool(data.get("enabled", True)))
        elif kind == "slow-polls":
            sim.set_slow_polls(_opt_float(data, "delay") or 0.0)
        elif kind == "zero-request-ids":
            sim.set_zero_runner_request_ids(bool(data.get("enabled", True)))
        elif kind == "admin-token-ttl":
            sim.set_admin_token_ttl(_opt_float(data, "seconds") or 30.0)
        else:
            raise KeyError(f"unknown fault kind {kind!r}")
        return json_response(sim.faults.describe(), 201)

    async def settings(self, request: web.Request) -> web.Response:
        data = await _body(request)
        setters: dict[str, Callable[[float], None]] = {
            "admin_token_ttl": self.sim.set_admin_token_ttl,
            "mq_token_ttl": self.sim.set_mq_token_ttl,
            "poll_timeout": self.sim.set_poll_timeout,
            "session_idle_timeout": self.sim.set_session_idle_timeout,
        }
        unknown = set(data) - set(setters) - {"assign_timeout"}
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        for key, setter in setters.items():
            value = _opt_float(data, key)
            if value is not None:
                setter(value)
        if "assign_timeout" in data:
            self.sim.set_assign_timeout(_opt_float(data, "assign_timeout"))
        return json_response(
            {
                "admin_token_ttl": self.sim.tokens.admin_token_ttl,
                "mq_token_ttl": self.sim.tokens.mq_token_ttl,
                "poll_timeout": self.sim.poll_timeout,
                "session_idle_timeout": self.sim.engine.session_idle_timeout,
                "assign_timeout": self.sim.engine.assign_timeout,
            }
        )

    async def stats(self, request: web.Request) -> web.Response:
        return json_response(self.sim.stats())

    async def snapshot(self, request: web.Request) -> web.Response:
        return json_response(self.sim.snapshot())

    async def active_peak(self, request: web.Request) -> web.Response:
        """``?scaleSets=1,2,3`` (or ``1:2,2:0.5``, id:weight): the most jobs those scale sets
        held together (assigned + running, weighted) at any moment, and now."""
        weights: dict[int, float] = {}
        for part in request.query.get("scaleSets", "").split(","):
            if part.strip():
                key, _, weight = part.partition(":")
                weights[int(key)] = float(weight) if weight else 1.0
        return json_response(self.sim.engine.active_peak(weights))

    async def list_requests(self, request: web.Request) -> web.Response:
        records = self.sim.requests_matching(
            request.query.get("route", "*"), request.query.get("method")
        )
        return json_response({"requests": [asdict(r) for r in records]})
