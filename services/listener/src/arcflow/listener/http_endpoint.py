"""A one-path HTTP endpoint on asyncio streams (the listener's ``/metrics``).

aiohttp's server would cost ~13 MB of memory and ~0.6 CPU seconds of imports in a process that
answers one GET every scrape interval. This serves exactly one path: ``GET``/``HEAD`` of it
answers 200 with the body, any other path 404, any other method 405; one request per
connection (``Connection: close``), request line and headers read within a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("arcflow.listener.http")

#: Seconds a client has to send its request line and headers.
READ_DEADLINE = 10.0
_MAX_HEADER_LINES = 100
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class HttpEndpoint:
    """Serve ``render()`` with ``content_type`` at ``path`` on ``host:port``."""

    def __init__(self, path: str, render: Callable[[], bytes], content_type: str) -> None:
        self.path = path
        self._render = render
        self._content_type = content_type
        self._server: asyncio.Server | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host or None, port)
        sockets = self._server.sockets or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else port

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
        return parts[0], parts[1].split("?", 1)[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = await asyncio.wait_for(self._read_request(reader), READ_DEADLINE)
            except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
                return
            body, content_type = b"", "text/plain; charset=utf-8"
            if request is None:
                status = 400
            elif request[1] != self.path:
                status = 404
            elif request[0] not in ("GET", "HEAD"):
                status = 405
            else:
                status, body, content_type = 200, self._render(), self._content_type
            if status != 200:
                body = f"{status} {_REASONS[status]}\n".encode()
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            writer.write(head if request is not None and request[0] == "HEAD" else head + body)
            await writer.drain()
        except ConnectionError:
            pass
        except Exception:
            log.exception("metrics endpoint failed to answer")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
