"""The asyncio HTTP endpoint over real sockets (ADR 0125): routes, methods, bad requests, a
raising handler, a client that never finishes its request."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from arcflow.common import http_endpoint
from arcflow.common.http_endpoint import HttpEndpoint, Reply


async def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def _echo(query: Mapping[str, str]) -> Reply:
    return Reply(200, repr(sorted(query.items())).encode(), "text/x-echo")


def _broken(_query: Mapping[str, str]) -> Reply:
    raise RuntimeError("boom")


@pytest.fixture
async def port() -> object:
    endpoint = HttpEndpoint({"/echo": _echo, "/broken": _broken})
    bound = await endpoint.start("127.0.0.1", 0)
    yield bound
    await endpoint.stop()


async def test_a_route_gets_its_query_and_its_content_type(port: int) -> None:
    status, headers, body = await _raw(port, b"GET /echo?top=5&x=a%20b HTTP/1.1\r\nHost: h\r\n\r\n")
    assert status == 200
    assert headers["Content-Type"] == "text/x-echo"
    assert headers["Connection"] == "close"
    assert body == repr([("top", "5"), ("x", "a b")]).encode()
    assert int(headers["Content-Length"]) == len(body)


async def test_head_answers_the_headers_only(port: int) -> None:
    status, headers, body = await _raw(port, b"HEAD /echo HTTP/1.1\r\n\r\n")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) > 0


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /nowhere HTTP/1.1\r\n\r\n", 404),
        (b"POST /echo HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        (b"hello\r\n\r\n", 400),
    ],
)
async def test_what_is_not_served_is_refused(port: int, request_bytes: bytes, status: int) -> None:
    assert (await _raw(port, request_bytes))[0] == status


async def test_a_raising_handler_answers_500_and_the_endpoint_keeps_serving(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    assert (await _raw(port, b"GET /broken HTTP/1.1\r\n\r\n"))[0] == 500
    assert "HTTP handler of /broken failed" in caplog.text
    assert (await _raw(port, b"GET /echo HTTP/1.1\r\n\r\n"))[0] == 200


async def test_a_client_that_never_finishes_is_cut_off(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_endpoint, "READ_DEADLINE", 0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /echo HTTP/1.1\r\n")  # headers never end
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
    writer.close()
    assert (await _raw(port, b"GET /echo HTTP/1.1\r\n\r\n"))[0] == 200
