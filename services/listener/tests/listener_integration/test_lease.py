"""Lease mechanics on a real nats-server (ADR 0025): one winner, fencing by revision."""

from __future__ import annotations

import asyncio

import nats
import pytest

from arcflow.devstack.nats_server import NatsServer
from arcflow.listener.lease import LeaseRecord, LeaseStore, LeaseTiming, ScaleSetLease

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TIMING = LeaseTiming(ttl=0.6, renew_every=0.2, check_every=0.05, defer=0.2)


async def test_a_lapsed_lease_goes_to_exactly_one_contender_and_fences_the_old_holder(
    private_nats_server: NatsServer,
) -> None:
    nc = await nats.connect(private_nats_server.url)
    try:
        store = await LeaseStore.open(nc.jetstream())
        old = ScaleSetLease(store, 5, "old/0", preferred=True, timing=TIMING)
        stop = asyncio.Event()
        assert await old.acquire(stop)
        # The old holder is "paused": it does not renew. Two contenders race for the lease.
        a = ScaleSetLease(store, 5, "a/0", preferred=False, timing=TIMING)
        b = ScaleSetLease(store, 5, "b/1", preferred=False, timing=TIMING)
        winner = asyncio.ensure_future(
            asyncio.wait(
                {
                    asyncio.ensure_future(a.acquire(stop)),
                    asyncio.ensure_future(b.acquire(stop)),
                },
                return_when=asyncio.FIRST_COMPLETED,
            )
        )
        await asyncio.wait_for(winner, 10)
        assert [a.held, b.held].count(True) == 1
        taker = a if a.held else b
        assert taker.takeovers == 1
        assert taker.taken_from == "old/0"
        record, _ = await store.read(5)
        assert record == LeaseRecord(taker.holder, TIMING.ttl)
        # The old holder wakes up: its next renewal finds another holder and it lets go.
        await asyncio.wait_for(old.hold(stop), 5)
        assert not old.held
        # The taker renews, then releases on shutdown: the key is gone.
        holding = asyncio.ensure_future(taker.hold(stop))
        await asyncio.sleep(TIMING.ttl * 2)
        assert taker.held
        assert (await store.read(5))[0] == LeaseRecord(taker.holder, TIMING.ttl)
        stop.set()
        await holding
        await taker.release()
        assert await store.read(5) == (None, 0)
    finally:
        await nc.close()
