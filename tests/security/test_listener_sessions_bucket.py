"""The listener's session bucket (issue 14 item 2): only the listener identity writes it; the
reconciler may read it (ADR 0073) and change nothing in it."""

from __future__ import annotations

import nats.errors
import pytest

from arcflow.common.nats.permissions import LISTENER_SESSIONS_BUCKET
from arcflow.listener.sessions import SESSIONS_BUCKET, SessionRecord, SessionStore
from arcflow.reconciler.listener_sessions import ListenerSessions

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


async def test_the_reconciler_reads_session_records_and_changes_none(
    secured: SecuredNats,
) -> None:
    """ADR 0073: the reconciler learns which sessions are open from the bucket; its grant is
    read-only: no put, delete, purge, message delete or stream change."""
    listener = (await secured.connect("listener")).jetstream()
    store = await SessionStore.open(listener)
    await store.remember(9, SessionRecord("s-9", "pod-9", "pod"))

    nc = await secured.connect("reconciler")
    sessions = ListenerSessions(nc.jetstream(timeout=2.0))
    assert await sessions.open_among([9, 10]) == {9}
    assert secured.violations("reconciler") == []

    kv = await nc.jetstream(timeout=2.0).key_value(LISTENER_SESSIONS_BUCKET)
    stream = f"KV_{LISTENER_SESSIONS_BUCKET}"
    for change in (
        kv.put("9", b'{"session_id": "forged"}'),
        kv.delete("9"),
        kv.purge("9"),
        nc.jetstream(timeout=2.0).purge_stream(stream),
        nc.jetstream(timeout=2.0).delete_msg(stream, 1),
        nc.jetstream(timeout=2.0).delete_stream(stream),
    ):
        with pytest.raises(nats.errors.TimeoutError):
            await change
    for subject in (
        f"$KV.{LISTENER_SESSIONS_BUCKET}.9",
        f"$JS.API.STREAM.PURGE.{stream}",
        f"$JS.API.STREAM.MSG.DELETE.{stream}",
        f"$JS.API.STREAM.DELETE.{stream}",
    ):
        await secured.denied("reconciler", subject)
    assert await store.get(9) == SessionRecord("s-9", "pod-9", "pod")
    assert await sessions.open_among([9]) == {9}
    assert secured.violations("listener") == []


async def test_without_the_grant_the_reconciler_does_not_wait_on_every_pass(
    secured: SecuredNats,
) -> None:
    """An identity without the read grant (an installation from before ADR 0073): the read
    is refused, reported as unknown (``None``), and not tried again within the back-off."""
    listener = (await secured.connect("listener")).jetstream()
    await (await SessionStore.open(listener)).remember(5, SessionRecord("s-5", "pod-5", "pod"))
    nc = await secured.connect("watcher")
    sessions = ListenerSessions(nc.jetstream(timeout=0.5))
    assert await sessions.open_among([5]) is None
    await secured.denied("watcher", f"KV_{LISTENER_SESSIONS_BUCKET}")
    before = len(secured.violations("watcher"))
    assert await sessions.open_among([5]) is None
    assert len(secured.violations("watcher")) == before
