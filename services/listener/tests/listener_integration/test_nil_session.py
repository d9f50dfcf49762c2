"""A session created with the nil UUID as its id is refused, as upstream's listener refuses it
(docs/upstream-behaviour.md#listener-session): a failed session create with its own log line
and metric, retried under the supervisor's backoff; the sibling scale set is not affected.
Real simulator (its ``nil-session-id`` fault), nats-server and kube-apiserver."""

from __future__ import annotations

import logging

import httpx
import nats
import pytest

from arcflow.listener.app import Listener
from arcflow.listener.sessions import SessionStore

from .helpers import ARS, ListenerRig, RunningListener, Variant, eventually, ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

NIL = "00000000-0000-0000-0000-000000000000"
VARIANTS = [Variant("cpu", 0, 10), Variant("gpu", 0, 10)]


async def test_a_nil_session_is_refused_and_created_again(
    rig: ListenerRig, caplog: pytest.LogCaptureFixture
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    sim.enqueue_jobs(2, ["self-hosted-cpu"])
    # Sessions are created one set at a time in no fixed order: the first create of either
    # set may be the one that gets the nil id.
    sim.nil_session_id(times=1)
    config = rig.config(token, VARIANTS, ids, metrics_addr="127.0.0.1:0")
    listener = Listener(config, options=rig.options())
    caplog.set_level(logging.INFO, logger="arcflow.listener")
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()["scaleSets"]),
            lambda sets: all(s["session"] is not None for s in sets),
            within=30,
        )
        # Both sets poll on real sessions, and the queued jobs were scaled for.
        assert all(s["session"]["sessionId"] != NIL for s in sim.snapshot()["scaleSets"])
        await eventually(
            lambda: rig.ers_specs(VARIANTS), lambda specs: specs["cpu"].get("replicas") == 2
        )
        creates = sim.requests_matching("*/runnerscalesets/*/sessions", method="POST")
        assert len(creates) == 3, [r.path for r in creates]  # one refused, two kept
        refused = [u for u in listener.units if u.pump.session_failures]
        assert len(refused) == 1
        assert refused[0].pump.session_failures == {"nil_session_id": 1}
        assert refused[0].pump_stats.failures == 1
        assert "NilSessionError" in refused[0].pump_stats.last_error

        # The metric, scraped over HTTP.
        assert listener.metrics_port is not None
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{listener.metrics_port}/metrics")).text
        name = f'name="{refused[0].target.ephemeral_runner_set_name}"'
        lines = [
            line
            for line in text.splitlines()
            if line.startswith("arcflow_listener_session_failures_total{")
        ]
        assert any(name in line and 'reason="nil_session_id"' in line for line in lines), text
        assert all(line.endswith(" 1.0") for line in lines), lines

        # The nil id was never remembered as a session to delete later.
        nc = await nats.connect(rig.nats_url)
        try:
            records = await (await SessionStore.open(nc.jetstream())).records()
        finally:
            await nc.close()
        assert set(records) == set(ids.values())
        assert all(r.session_id != NIL for r in records.values())

    # The log line says what was wrong and which set.
    lines = [r.getMessage() for r in caplog.records if "nil session id" in r.getMessage()]
    assert any(ARS in line for line in lines), lines
    # Stopping deleted both real sessions; nothing tried to delete a nil one.
    deletes = sim.requests_matching("*/sessions/*", method="DELETE")
    assert all(NIL not in r.path for r in deletes)
    assert all(s["session"] is None for s in sim.snapshot()["scaleSets"])
