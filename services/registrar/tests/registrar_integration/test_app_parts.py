"""Health endpoints, the lease lock and the sweep, against a real nats-server."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import nats
import pytest
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.nats import KV_SCALESETS
from arcflow.common.scaleset_records import ScaleSetRecord, record_key
from arcflow.devstack.nats_server import NatsServer
from arcflow.registrar.locks import LeaseLocks, LockBusyError
from tests.metrics import metric_total
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


async def test_sweep_leaves_a_settled_ars_alone_and_finds_a_lost_record(stack: Stack) -> None:
    """ADR 0120: once registered (and checked on GitHub), an ARS costs its sweeps no pass and
    no Actions call; a record taken out of the bucket behind the registrar's back is seen by
    the live watch, and the next sweep registers the variant again."""
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar(meter=meter)
    await stack.kube.create(stack.ars_manifest("calm", [{"name": "a"}, {"name": "b"}]))
    sets = await eventually(lambda: registered(stack, {"calm-a", "calm-b"}))
    state = state_of(app)

    async def sweeps_settled(at_least: int) -> int:
        seen = metric_total(reader, "arcflow_registrar_sweep_settled")
        assert seen >= at_least, f"sweeps that found the ARS settled: {seen}"
        return seen

    await eventually(lambda: sweeps_settled(1), what="a sweep finding the ARS settled")
    await state.queue.wait_idle(10)  # the pass that announced the last record has finished
    first = metric_total(reader, "arcflow_registrar_sweep_settled")
    handled, requests = state.handled, len(stack.sim.requests)
    await eventually(lambda: sweeps_settled(first + 4), what="four more settled sweeps")
    assert state.handled == handled, "a settled ARS gets no converge pass from the sweep"
    assert len(stack.sim.requests) == requests, "nor any Actions call"

    kv = await stack.js.key_value(KV_SCALESETS.bucket)
    key = record_key(stack.namespace, "calm", "a")
    await kv.delete(key)

    async def registered_again() -> bool:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:  # a deleted key's marker too
            return False
        record = ScaleSetRecord.decode(entry.value or b"")
        assert record.scale_set_id == sets["calm-a"]["id"], record
        return True

    await eventually(registered_again, what="the lost record written again by a swept pass")

    async def swept_pass_finished() -> bool:
        # The record is written inside the pass; the pass counts once it has finished.
        assert state.handled > handled, (
            f"passes since the settled sweeps: {state.handled - handled}"
        )
        return True

    await eventually(swept_pass_finished, what="the pass that wrote the record finished")


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
