"""A small real HTTP proxy for tests: CONNECT tunnels only (what a client uses for an https
target), Basic proxy authentication when credentials are set, and a record of what it
tunnelled and refused. Runs on 127.0.0.1 in the test's event loop."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from dataclasses import dataclass, field


@dataclass
class ConnectProxy:
    username: str = ""
    password: str = ""
    tunnels: list[str] = field(default_factory=list)  # host:port of every tunnel opened
    refused: int = 0  # requests without the right credentials (answered 407)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _authorised(self, headers: dict[str, str]) -> bool:
        if not self.username:
            return True
        expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return headers.get("proxy-authorization", "") == f"Basic {expected}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (h.partition(":") for h in head[1:] if h)
            }
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            if not self._authorised(headers):
                self.refused += 1
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n'
                )
                return
            host, _, port = target.rpartition(":")
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()
            self._tasks.discard(task)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(Exception):
            sink.close()
