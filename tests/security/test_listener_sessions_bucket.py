"""The listener's session bucket (issue 14 item 2): only the listener identity writes it."""

from __future__ import annotations

import nats.errors
import pytest

from arcflow.common.nats.permissions import LISTENER_SESSIONS_BUCKET
from arcflow.listener.sessions import SESSIONS_BUCKET, SessionRecord, SessionStore

from .conftest import SecuredNats

pytestmark = pytest.mark.integration


def test_the_bucket_name_matches_the_listener() -> None:
    assert SESSIONS_BUCKET.bucket == LISTENER_SESSIONS_BUCKET


async def test_only_the_listener_writes_session_records(secured: SecuredNats) -> None:
    listener = (await secured.connect("listener")).jetstream()
    store = await SessionStore.open(listener)
    await store.remember(7, SessionRecord("s-1", "pod-7", "pod"))
    assert await store.get(7) == SessionRecord("s-1", "pod-7", "pod")
    await store.forget(7, "s-other")  # a successor's record is not removed
    assert await store.get(7) is not None
    await store.forget(7, "s-1")
    assert await store.get(7) is None
    await store.remember(8, SessionRecord("s-2", "pod-8", "pod"))

    subject = f"$KV.{LISTENER_SESSIONS_BUCKET}.8"
    for service in ("watcher", "registrar", "reconciler", "auditor"):
        nc = await secured.connect(service)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.jetstream().publish(subject, b'{"session_id": "forged"}', timeout=0.5)
        await secured.denied(service, subject)
    assert await store.get(8) == SessionRecord("s-2", "pod-8", "pod")
    assert secured.violations("listener") == []
