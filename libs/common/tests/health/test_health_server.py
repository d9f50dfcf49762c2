"""HealthServer over real HTTP: status codes follow the callables on every request."""

from __future__ import annotations

import aiohttp
import pytest

from arcflow.common.health import HealthServer


async def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.json()


async def test_status_follows_the_checks() -> None:
    state = {"live": True, "ready": False}
    server = HealthServer(
        "127.0.0.1",
        0,
        live=lambda: state["live"],
        ready=lambda: state["ready"],
        details=lambda: {"pending": [] if state["ready"] else ["resync"]},
    )
    port = await server.start()
    try:
        assert port > 0
        assert await _get(port, "/healthz") == (200, {"status": "ok"})
        assert await _get(port, "/readyz") == (503, {"status": "not ready", "pending": ["resync"]})
        state["ready"] = True
        assert await _get(port, "/readyz") == (200, {"status": "ready", "pending": []})
        state["live"] = False  # not live is never ready
        assert await _get(port, "/healthz") == (503, {"status": "failed"})
        assert (await _get(port, "/readyz"))[0] == 503
    finally:
        await server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _get(port, "/healthz")


async def test_a_raising_check_is_not_ok() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    server = HealthServer("127.0.0.1", 0, live=lambda: True, ready=broken)
    port = await server.start()
    try:
        assert await _get(port, "/readyz") == (503, {"status": "not ready"})
        assert (await _get(port, "/healthz"))[0] == 200
    finally:
        await server.stop()


async def test_port_in_use_is_a_clear_error() -> None:
    first = HealthServer("127.0.0.1", 0, live=lambda: True, ready=lambda: True)
    port = await first.start()
    try:
        second = HealthServer("127.0.0.1", port, live=lambda: True, ready=lambda: True)
        with pytest.raises(OSError):
            await second.start()
    finally:
        await first.stop()


async def _text(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as resp,
    ):
        return resp.status, await resp.text()


async def test_profiling_is_off_by_default_and_serves_stacks_and_memory_when_on() -> None:
    """Issue 33 (ADR 0086): ``/debug/stacks`` and ``/debug/memory`` exist only with
    ``profiling``; the dump names every asyncio task, the top names source lines."""
    import asyncio
    import tracemalloc

    off = HealthServer("127.0.0.1", 0, live=lambda: True, ready=lambda: True)
    port = await off.start()
    try:
        assert (await _text(port, "/debug/stacks"))[0] == 404
        assert (await _text(port, "/debug/memory"))[0] == 404
    finally:
        await off.stop()
    assert not tracemalloc.is_tracing()

    on = HealthServer("127.0.0.1", 0, live=lambda: True, ready=lambda: True, profiling=True)
    port = await on.start()
    waiter = asyncio.create_task(asyncio.Event().wait(), name="arcflow-test-waiter")
    try:
        kept = [bytearray(1024) for _ in range(256)]  # noqa: F841 - memory to be seen
        status, stacks = await _text(port, "/debug/stacks")
        assert status == 200
        assert "--- thread MainThread" in stacks
        assert "--- task arcflow-test-waiter" in stacks
        status, top = await _text(port, "/debug/memory?top=5")
        assert status == 200
        assert top.startswith("total traced: ")
        assert len(top.strip().splitlines()) == 6
        assert "test_health_server.py" in top
    finally:
        waiter.cancel()
        await on.stop()
        tracemalloc.stop()
