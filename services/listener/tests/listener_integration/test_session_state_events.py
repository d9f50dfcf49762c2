"""A failed session create reaches the ARS through ``arc.errors`` (ADR 0064, amendment): one
``session.failed`` per failure streak however often the supervisor retries, then one
``session.opened`` when the session opens; the sibling scale set only says it opened. Real
simulator (a 409 on one scale set's session path), nats-server and kube-apiserver."""

from __future__ import annotations

import nats
import pytest

from arcflow.common.events import SessionFailed, SessionOpened, parse_event
from arcflow.common.nats.jetstream import STREAM_ERRORS, ensure_stream
from arcflow.common.subjects import errors_subject
from arcflow.listener.app import Listener

from .helpers import ARS, ListenerRig, RunningListener, Variant, eventually, ready, stream_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

VARIANTS = [Variant("cpu", 0, 10), Variant("gpu", 0, 10)]
REFUSED = 3


async def test_one_event_per_streak_then_opened(rig: ListenerRig) -> None:
    sim = rig.sim
    nc = await nats.connect(rig.nats_url)
    try:
        await ensure_stream(nc.jetstream(), STREAM_ERRORS)  # the watcher declares it in a stack
    finally:
        await nc.close()
    token, ids = await rig.register(VARIANTS)
    refused_id = ids["gpu"]
    sim.inject_status(
        f"*/runnerscalesets/{refused_id}/sessions",
        409,
        times=REFUSED,
        method="POST",
        type_name="RunnerScaleSetSessionConflictException",
    )
    listener = Listener(rig.config(token, VARIANTS, ids), options=rig.options())
    subject = errors_subject(rig.namespace, ARS)

    async def events() -> list[SessionFailed | SessionOpened]:
        out = []
        for _, data in await stream_events(rig.nats_url, subject):
            event = parse_event(data)
            assert isinstance(event, SessionFailed | SessionOpened)
            out.append(event)
        return out

    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()["scaleSets"]),
            lambda sets: all(s["session"] is not None for s in sets),
            within=30,
        )
        seen = await eventually(events, lambda found: len(found) >= 3, within=10)
        refused = next(u for u in listener.units if u.target.scale_set_id == refused_id)
        assert refused.pump.session_failures == {"conflict": REFUSED}

    by_variant = {
        v.name: [(e.type, e.scale_set_id) for e in seen if e.variant == v.name] for v in VARIANTS
    }
    assert by_variant == {
        "cpu": [("session.opened", ids["cpu"])],
        "gpu": [("session.failed", refused_id), ("session.opened", refused_id)],
    }
    failed = next(e for e in seen if isinstance(e, SessionFailed))
    assert failed.reason == "conflict"
    assert failed.keys.namespace == rig.namespace
    assert failed.keys.ars == ARS
    assert failed.message.startswith("SessionConflictError: ")
    assert token not in failed.message
