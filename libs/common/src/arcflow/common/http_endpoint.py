"""A small HTTP endpoint on asyncio streams: the listener's ``/metrics`` and every service's
``/healthz``, ``/readyz`` and (opt-in) ``/debug/*`` (ADR 0125).

aiohttp's server costs about 10-13 MiB of memory and half a CPU second of imports in a process
that answers a probe every few seconds. This serves a fixed table of paths: ``GET``/``HEAD`` of
a path runs its handler with the query's parameters; an unknown path answers 404, any other
method 405, a request that is not HTTP 400. One request per connection (``Connection:
close``); the request line and headers must arrive within a deadline. A handler that raises
answers 500 and is logged; the endpoint keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

log = logging.getLogger("arcflow.http")

#: Seconds a client has to send its request line and headers.
READ_DEADLINE = 10.0
_MAX_HEADER_LINES = 100
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
TEXT = "text/plain; charset=utf-8"
JSON = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """What a handler answers."""

    status: int
    body: bytes
    content_type: str = TEXT


#: A path's handler: the query's parameters in, the reply out (called on every request).
Handler = Callable[[Mapping[str, str]], Reply]


class HttpEndpoint:
    """Serve ``routes`` (path -> handler) on ``host:port``."""

    def __init__(self, routes: Mapping[str, Handler]) -> None:
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> int:
        """Bind and serve; returns the bound port (``port=0`` picks a free one). A port in use
        raises ``OSError``."""
        if self._server is not None:
            raise RuntimeError("endpoint already started")
        self._server = await asyncio.start_server(self._serve, host or None, port)
        sockets = self._server.sockets or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str] | None:
        line = await reader.readline()
        parts = line.decode("latin-1").split()
        for _ in range(_MAX_HEADER_LINES):
            header = await reader.readline()
            if header in (b"\r\n", b"\n", b""):
                break
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return None
        return parts[0], parts[1]

    def _answer(self, request: tuple[str, str] | None) -> Reply:
        if request is None:
            return _plain(400)
        method, target = request
        path, _, query = target.partition("?")
        handler = self._routes.get(path)
        if handler is None:
            return _plain(404)
        if method not in ("GET", "HEAD"):
            return _plain(405)
        try:
            return handler(dict(parse_qsl(query)))
        except Exception:
            log.exception("HTTP handler of %s failed", path)
            return _plain(500)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(self._read_request(reader), READ_DEADLINE)
            except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
                return
            reply = self._answer(request)
            reason = _REASONS.get(reply.status, "Unknown")
            head = (
                f"HTTP/1.1 {reply.status} {reason}\r\nContent-Type: {reply.content_type}\r\n"
                f"Content-Length: {len(reply.body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            head_only = request is not None and request[0] == "HEAD"
            writer.write(head if head_only else head + reply.body)
            await writer.drain()
        except ConnectionError:
            pass
        except Exception:
            log.exception("HTTP endpoint failed to answer")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _plain(status: int) -> Reply:
    return Reply(status, f"{status} {_REASONS[status]}\n".encode())
