"""One small ``/healthz`` + ``/readyz`` HTTP server for every service (and, when profiling is
on, ``/debug/stacks`` and ``/debug/memory?top=N``: ADR 0086).

Kubernetes probes only need a status code; the JSON body is for humans (``curl``). The two
callables are read on every request, so the server never caches a stale answer; a callable
that raises counts as "not ok" rather than crashing the probe handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

Check = Callable[[], bool]
Details = Callable[[], Mapping[str, Any]]


def _safe(check: Check) -> bool:
    try:
        return bool(check())
    except Exception as exc:  # a broken check means "not ok", never a 500
        log.warning("health check raised", extra={"error": type(exc).__name__})
        return False


class HealthServer:
    """Serve ``/healthz`` (``live``) and ``/readyz`` (``ready``): 200 when true, else 503.

    ``details`` (optional) adds keys to the ``/readyz`` body, e.g. what is still pending.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        live: Check,
        ready: Check,
        details: Details | None = None,
        profiling: bool = False,
    ) -> None:
        self.host = host
        self._profiling = profiling
        self.port = port
        self._live = live
        self._ready = ready
        self._details = details
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    def app(self) -> web.Application:
        application = web.Application()
        application.router.add_get("/healthz", self._healthz)
        application.router.add_get("/readyz", self._readyz)
        if self._profiling:  # opt-in (ADR 0086): a stack dump and the memory top
            from arcflow.common.profiling import start_tracing

            start_tracing()
            application.router.add_get("/debug/stacks", self._stacks)
            application.router.add_get("/debug/memory", self._memory)
        return application

    async def _stacks(self, _request: web.Request) -> web.Response:
        from arcflow.common.profiling import stack_dump

        return web.Response(text=stack_dump())

    async def _memory(self, request: web.Request) -> web.Response:
        from arcflow.common.profiling import memory_top

        raw = request.query.get("top", "25")
        limit = int(raw) if raw.isdigit() else 25
        return web.Response(text=memory_top(min(limit, 500)))

    async def _healthz(self, _request: web.Request) -> web.Response:
        ok = _safe(self._live)
        return web.json_response({"status": "ok" if ok else "failed"}, status=200 if ok else 503)

    async def _readyz(self, _request: web.Request) -> web.Response:
        ok = _safe(self._live) and _safe(self._ready)
        body: dict[str, Any] = {"status": "ready" if ok else "not ready"}
        if self._details is not None:
            try:
                body.update(self._details())
            except Exception as exc:
                log.warning("health details raised", extra={"error": type(exc).__name__})
        return web.json_response(body, status=200 if ok else 503)

    async def start(self) -> int:
        """Bind and serve; returns the bound port (``port=0`` picks a free one)."""
        if self._runner is not None:
            raise RuntimeError("health server already started")
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self.port
        return self.bound_port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
