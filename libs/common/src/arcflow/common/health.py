"""One small ``/healthz`` + ``/readyz`` HTTP server for every service (and, when profiling is
on, ``/debug/stacks`` and ``/debug/memory?top=N``: ADR 0086), on the asyncio endpoint the
listener's metrics use (ADR 0125: no aiohttp in a service process).

Kubernetes probes only need a status code; the JSON body is for humans (``curl``). The two
callables are read on every request, so the server never caches a stale answer; a callable
that raises counts as "not ok" rather than crashing the probe handler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from arcflow.common.http_endpoint import JSON, Handler, HttpEndpoint, Reply

log = logging.getLogger(__name__)

Check = Callable[[], bool]
Details = Callable[[], Mapping[str, Any]]


def _safe(check: Check) -> bool:
    try:
        return bool(check())
    except Exception as exc:  # a broken check means "not ok", never a 500
        log.warning("health check raised", extra={"error": type(exc).__name__})
        return False


def _json(body: Mapping[str, Any], ok: bool) -> Reply:
    return Reply(200 if ok else 503, json.dumps(body).encode(), JSON)


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
        self._endpoint: HttpEndpoint | None = None
        self.bound_port: int | None = None

    def routes(self) -> dict[str, Handler]:
        routes: dict[str, Handler] = {"/healthz": self._healthz, "/readyz": self._readyz}
        if self._profiling:  # opt-in (ADR 0086): a stack dump and the memory top
            from arcflow.common.profiling import start_tracing

            start_tracing()
            routes["/debug/stacks"] = self._stacks
            routes["/debug/memory"] = self._memory
        return routes

    def _stacks(self, _query: Mapping[str, str]) -> Reply:
        from arcflow.common.profiling import stack_dump

        return Reply(200, stack_dump().encode())

    def _memory(self, query: Mapping[str, str]) -> Reply:
        from arcflow.common.profiling import memory_top

        raw = query.get("top", "25")
        limit = int(raw) if raw.isdigit() else 25
        return Reply(200, memory_top(min(limit, 500)).encode())

    def _healthz(self, _query: Mapping[str, str]) -> Reply:
        ok = _safe(self._live)
        return _json({"status": "ok" if ok else "failed"}, ok)

    def _readyz(self, _query: Mapping[str, str]) -> Reply:
        ok = _safe(self._live) and _safe(self._ready)
        body: dict[str, Any] = {"status": "ready" if ok else "not ready"}
        if self._details is not None:
            try:
                body.update(self._details())
            except Exception as exc:
                log.warning("health details raised", extra={"error": type(exc).__name__})
        return _json(body, ok)

    async def start(self) -> int:
        """Bind and serve; returns the bound port (``port=0`` picks a free one)."""
        if self._endpoint is not None:
            raise RuntimeError("health server already started")
        endpoint = HttpEndpoint(self.routes())
        self.bound_port = await endpoint.start(self.host, self.port)
        self._endpoint = endpoint
        return self.bound_port

    async def stop(self) -> None:
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            await endpoint.stop()
