"""KvMirror against a real nats-server (ADR 0122): the bucket replayed, then every put and
delete as it happens; a malformed value left out with its key logged; not live while the
server is down, and live and current again after it restarts."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NatsClient
from nats.js.api import KeyValueConfig

from arcflow.common.nats.kv_mirror import KvMirror
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

pytestmark = pytest.mark.integration

BUCKET = "t_mirror"


def _decode(data: bytes) -> dict[str, int]:
    value = json.loads(data)  # json.JSONDecodeError is a ValueError: left out
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


@pytest.fixture
async def nc(private_nats_server: NatsServer) -> AsyncIterator[NatsClient]:
    client = await nats.connect(
        private_nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    try:
        yield client
    finally:
        await client.close()


async def _until(what: str, condition: Callable[[], bool], within: float = 10.0) -> None:
    async def check() -> bool:
        assert condition(), what
        return True

    await eventually(check, within=within, what=what)


async def test_replay_then_changes_as_they_happen(
    nc: NatsClient, caplog: pytest.LogCaptureFixture
) -> None:
    kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket=BUCKET))
    await kv.put("a", b'{"n": 1}')
    await kv.put("b", b'{"n": 2}')
    await kv.put("b", b'{"n": 3}')
    mirror = KvMirror(kv, _decode, what="test record")
    assert not mirror.live
    await mirror.start()
    try:
        await asyncio.wait_for(mirror.synced(), 10)
        assert mirror.live
        assert (mirror.get("a"), mirror.get("b")) == ({"n": 1}, {"n": 3})
        await kv.put("c", b'{"n": 4}')
        await kv.delete("a")
        await _until("c put and a deleted", lambda: mirror.get("c") == {"n": 4})
        await _until("a deleted", lambda: mirror.get("a") is None)
        with caplog.at_level(logging.ERROR, logger="arcflow.common.nats.kv_mirror"):
            await kv.put("b", b"not json")
            await _until("the malformed b left out", lambda: mirror.get("b") is None)
        assert any(getattr(r, "key", None) == "b" for r in caplog.records)
        assert "not json" not in caplog.text
        assert sorted(v["n"] for v in mirror.values()) == [4]
    finally:
        await mirror.stop()
    assert not mirror.live


async def test_not_live_while_the_server_is_down_and_current_after(
    nc: NatsClient, private_nats_server: NatsServer
) -> None:
    kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket=BUCKET))
    await kv.put("a", b'{"n": 1}')
    mirror = KvMirror(kv, _decode, what="test record", connection=nc)
    await mirror.start()
    try:
        await asyncio.wait_for(mirror.synced(), 10)
        await asyncio.to_thread(private_nats_server.stop, remove_store=False)
        try:
            await _until("the mirror not live with the server down", lambda: not mirror.live)
        finally:
            await asyncio.to_thread(private_nats_server.start)

        async def written() -> bool:
            try:
                await kv.put("b", b'{"n": 2}')
            except (nats.errors.Error, TimeoutError) as exc:
                raise AssertionError(f"the put failed: {type(exc).__name__}") from None
            return True

        await eventually(written, within=30, what="a put after the restart")
        await _until(
            "the mirror live again with the put made after the restart",
            lambda: mirror.live and mirror.get("b") == {"n": 2} and mirror.get("a") == {"n": 1},
            within=30,
        )
    finally:
        await mirror.stop()
