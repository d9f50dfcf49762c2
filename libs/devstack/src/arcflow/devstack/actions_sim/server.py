"""``ActionsSimulator``: the simulated GitHub + Actions service over HTTP, and its control API.

Tests, the contract suite and the dev stack all talk to it over real HTTP; the Python methods
(:class:`~arcflow.devstack.actions_sim.core.SimulatorCore`) are the same control API the
``/_sim`` routes expose. This module serves them: lifecycle, URLs, middleware.
"""

from __future__ import annotations

import logging
import ssl
import uuid
from types import TracebackType
from typing import Any, Self, Unpack

from aiohttp import web

from arcflow.devstack.actions_sim.control_routes import ControlRoutes
from arcflow.devstack.actions_sim.core import (
    RequestRecord,
    RunnerRun,
    SimulatorCore,
    SimulatorOptions,
)
from arcflow.devstack.actions_sim.faults import FaultRule
from arcflow.devstack.actions_sim.model import DROPPED, DroppedConnectionError, ServiceError
from arcflow.devstack.actions_sim.runner_routes import RunnerRoutes
from arcflow.devstack.actions_sim.service_routes import SVC_PREFIX, ServiceRoutes
from arcflow.devstack.actions_sim.wire import github_error_response, service_error_response

log = logging.getLogger("arcflow.devstack.actions_sim")

BOM = b"\xef\xbb\xbf"

__all__ = ["ActionsSimulator", "RequestRecord", "RunnerRun"]


class ActionsSimulator(SimulatorCore):
    """A stateful GitHub + Actions scale-set service on ``host:port`` (0 picks a free port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        advertise_url: str = "",
        **options: Unpack[SimulatorOptions],
    ) -> None:
        super().__init__(**options)
        self.host = host
        self.port = port
        # The URL clients reach it by, when not the address it binds (in compose it listens on
        # 0.0.0.0 and is reached as ``actions-sim``; for the node's pods it is the node's
        # address): every URL it hands out (the Actions service URL at registration, the
        # message queue URL) names it.
        self.advertise_url = advertise_url.rstrip("/")
        # Served over TLS with this context (a GHES behind a private CA), else plain HTTP.
        self.ssl_context = ssl_context
        self._runner: web.AppRunner | None = None

    def __repr__(self) -> str:
        return f"ActionsSimulator(base_url={self.base_url!r}, mode={self.engine.mode!r})"

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("the simulator is already running")
        app = web.Application(middlewares=[self._middleware])
        ServiceRoutes(self).register(app)
        RunnerRoutes(self).register(app)
        ControlRoutes(self).register(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl_context)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("Actions simulator listening on %s (mode %s)", self.local_url, self.engine.mode)

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
        """The URL clients use (the advertised one, else the bound address)."""
        return self.advertise_url or self.local_url

    @property
    def local_url(self) -> str:
        """The address it binds, as a URL."""
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
        except DroppedConnectionError:
            if request.transport is not None:
                request.transport.close()  # the client reads EOF where an answer should be
            self.requests.append(RequestRecord(request.method, path, DROPPED))
            log.debug("%s %s -> connection dropped", request.method, path)
            return web.Response(status=503)  # never reaches the client: its connection is gone
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
