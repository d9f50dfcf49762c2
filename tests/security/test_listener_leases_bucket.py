"""The standby listener's lease bucket (issue 14 item 3, ADR 0025): only the listener writes it.

A forged lease (or a forged presence key) would hand a scale set to nobody or stop a live
replica; every other identity is refused by the real nats-server, and the listener's own
compare-and-set reads and writes work under its permissions.
"""

from __future__ import annotations

import nats.errors
import pytest

from arcflow.common.nats.permissions import LISTENER_LEASES_BUCKET
from arcflow.listener.lease import LEASES_BUCKET, LeaseRecord, LeaseStore

from .conftest import SecuredNats

pytestmark = pytest.mark.integration


def test_the_bucket_name_matches_the_listener() -> None:
    assert LEASES_BUCKET.bucket == LISTENER_LEASES_BUCKET


async def test_only_the_listener_writes_leases(secured: SecuredNats) -> None:
    listener = (await secured.connect("listener")).jetstream()
    store = await LeaseStore.open(listener)
    revision = await store.claim(8, LeaseRecord("pod-a/0", 3.0), 0)
    assert revision
    assert await store.claim(8, LeaseRecord("pod-b/1", 3.0), 0) is None  # held: no second
    renewed = await store.claim(8, LeaseRecord("pod-a/0", 3.0), revision)
    assert renewed
    assert renewed > revision
    await store.announce(0, "pod-a/0")
    assert await store.presence_revision(0) > 0

    for key in ("8", "replica-1"):
        subject = f"$KV.{LISTENER_LEASES_BUCKET}.{key}"
        for service in ("watcher", "registrar", "reconciler", "auditor"):
            nc = await secured.connect(service)
            with pytest.raises(nats.errors.TimeoutError):
                await nc.jetstream().publish(subject, b'{"holder": "forged"}', timeout=0.5)
            await secured.denied(service, subject)
    assert await store.read(8) == (LeaseRecord("pod-a/0", 3.0), renewed)
    assert await store.presence_revision(1) == 0
    assert secured.violations("listener") == []
