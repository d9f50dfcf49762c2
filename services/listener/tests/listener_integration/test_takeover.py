"""Back in seconds after a SIGKILL (issue 14 item 2), and upstream's conflict budget.

A real ``python -m arcflow.listener`` serving three variants is killed during a burst and
started again at once (as the kubelet restarts a container): the new process deletes the
sessions its predecessor left (remembered in the listener's KV bucket) before creating its
own, so GitHub answers no 409 and every variant polls again; no job is lost.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import nats
import nats.js.errors
import pytest

from arcflow.listener.app import Listener
from arcflow.listener.sessions import SESSIONS_BUCKET, SessionStore

from .helpers import ListenerRig, RunningListener, Variant, eventually, ready
from .test_crash_process import _env, _reap, _spawn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

VARIANTS = [Variant("cpu", 0, 100), Variant("gpu", 0, 100), Variant("arm", 0, 100)]


async def remembered(nats_url: str) -> dict[int, str]:
    """Scale set id -> session id, as the listener's sessions bucket holds them."""
    nc = await nats.connect(nats_url)
    try:
        store = SessionStore(await nc.jetstream().key_value(SESSIONS_BUCKET.bucket))
        return {k: r.session_id for k, r in (await store.records()).items()}
    finally:
        await nc.close()


async def test_a_killed_listener_deletes_its_old_sessions_and_polls_again(
    rig: ListenerRig, tmp_path: Path
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    config_path = tmp_path / "config.json"
    config_path.write_text(rig.config(token, VARIANTS, ids).to_json())
    env = _env(config_path, rig.nats_url, rig.kubeconfig)

    def open_sessions() -> dict[int, str]:
        return {
            s["id"]: s["session"]["sessionId"] for s in sim.snapshot()["scaleSets"] if s["session"]
        }

    first = await _spawn(env, tmp_path / "1.log")
    second: asyncio.subprocess.Process | None = None
    try:
        await eventually(lambda: ready(open_sessions()), lambda s: len(s) == 3, within=30)
        old = open_sessions()
        # The record is written just after GitHub opens the session; a kill inside that
        # window leaves nothing to delete (the successor then waits out the conflict), which
        # is not what this test is about.
        await eventually(lambda: remembered(rig.nats_url), lambda r: r == old, within=30)
        for variant in VARIANTS:
            sim.enqueue_jobs(20, [variant.label])
        first.send_signal(signal.SIGKILL)  # during the burst
        assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL
        mark = len(sim.requests)
        second = await _spawn(env, tmp_path / "2.log")
        new = await eventually(
            lambda: ready(open_sessions()),
            lambda s: len(s) == 3 and not set(s.values()) & set(old.values()),
            within=30,
        )
        await eventually(
            lambda: ready(
                {
                    int(r.path.split("/runnerscalesets/")[1].split("/")[0])
                    for r in list(sim.requests)[mark:]
                    if r.method == "GET" and r.path.endswith("/messages")
                }
            ),
            lambda seen: seen == set(ids.values()),
        )
        await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: all(s[v.name].get("replicas") == 20 for v in VARIANTS),
            within=30,
        )
        after = list(sim.requests)[mark:]
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 20) == 0
    finally:
        await _reap(first)
        if second is not None:
            await _reap(second)
    creates = [r for r in after if r.method == "POST" and r.path.endswith("/sessions")]
    assert [r.status for r in creates] == [200, 200, 200]  # no 409 at all
    deleted = {
        r.path.rsplit("/", 1)[1] for r in after if r.method == "DELETE" and "/sessions/" in r.path
    }
    assert set(old.values()) <= deleted
    assert set(new) == set(ids.values())
    assert token not in (tmp_path / "2.log").read_text()


async def test_single_set_mode_retries_a_conflicting_session(rig: ListenerRig) -> None:
    """A 409 is retried by the unit's supervisor, not by a client budget (upstream's 10 x 30 s)
    nor by exiting (ADR 0087)."""
    sim = rig.sim
    variants = [Variant("cpu", 0, 10)]
    token, ids = await rig.register(variants)
    config = rig.single_config(token, variants[0], ids)
    sim.conflict_session_create(times=2)
    listener = Listener(config, options=rig.options())
    assert not listener.multi
    async with RunningListener(listener) as running:
        await eventually(lambda: ready(sim.snapshot()["scaleSets"][0]["session"]), bool, within=30)
        sim.enqueue_jobs(2, ["self-hosted-cpu"])
        await eventually(lambda: rig.ers_specs(variants), lambda s: s["cpu"].get("replicas") == 2)
        assert running.units[0].pump.session_id
    creates = sim.requests_matching("*/runnerscalesets/*/sessions", method="POST")
    assert [r.status for r in creates] == [409, 409, 200]
    assert running.units[0].pump_stats.failures == 2
    assert Listener(config).options.retry_conflict is None  # no client budget by default
