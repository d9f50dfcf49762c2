"""Health endpoints, the lease lock and the sweep, against a real nats-server."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import nats
import pytest
from nats.js.api import KeyValueConfig

from arcflow.devstack.nats_server import NatsServer
from arcflow.registrar.locks import LeaseLocks, LockBusyError
from tests.polling import eventually, settled

from .harness import Stack, state_of
from .test_lifecycle import apply_ars, registered

pytestmark = pytest.mark.integration


async def test_health_and_readiness(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar()
    base = f"http://127.0.0.1:{app.health_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as response:
            assert response.status == 200
        async with http.get(f"{base}/readyz") as response:
            assert response.status == 200
            assert (await response.json())["status"] == "ready"
        await app.stop_subscribers()
        async with http.get(f"{base}/readyz") as response:
            assert response.status == 503


async def test_lease_lock_excludes_then_is_taken_over_after_expiry(
    private_nats_server: NatsServer,
) -> None:
    nc = await nats.connect(private_nats_server.url)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(KeyValueConfig(bucket="locks_test"))
        first = LeaseLocks(kv, "a", ttl_seconds=0.6, wait_seconds=0.1)
        second = LeaseLocks(kv, "b", ttl_seconds=0.6, wait_seconds=0.1)
        async with first.hold("ns.arc"):
            with pytest.raises(LockBusyError):
                async with second.hold("ns.arc"):
                    pass
            held = json.loads((await kv.get("ns.arc")).value or b"{}")
            assert held["owner"] == "a"
        async with second.hold("ns.arc"):  # released: free at once
            pass
        # A holder that died (lease written, never released) is taken over after expiry.
        await kv.put("ns.dead", json.dumps({"owner": "x", "expires": time.time() + 0.3}).encode())
        with pytest.raises(LockBusyError):
            async with first.hold("ns.dead"):
                pass
        await asyncio.sleep(0.35)
        async with first.hold("ns.dead"):
            assert json.loads((await kv.get("ns.dead")).value or b"{}")["owner"] == "a"
    finally:
        await nc.drain()


async def test_sweep_registers_an_ars_whose_event_was_lost(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    # Created without any change event: only the periodic sweep can find it.
    await stack.kube.create(stack.ars_manifest("quiet"))
    await eventually(lambda: registered(stack, {"quiet"}))


async def test_same_event_twice_is_idempotent(stack: Stack) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar(run_sweep=False)
    created = await apply_ars(stack, stack.ars_manifest("idem", [{"name": "a"}]))
    await eventually(lambda: registered(stack, {"idem-a"}))
    requests = await settled(lambda: len(stack.sim.requests))
    state = state_of(app)
    handled = state.handled
    state.context.enqueue(stack.namespace, "idem", trigger="test")

    async def passed() -> bool:
        return state.handled > handled

    await eventually(passed)
    await state.queue.wait_idle(10)
    assert len(stack.sim.requests) == requests, "a converged ARS costs no Actions call"
    del created
