"""Standby listener (issue 14 item 3, ADR 0025): two replicas, one lease per scale set.

Real nats-server, Actions simulator and Kubernetes emulator. In process: a lease and a session
left by a dead replica are taken over (the stale session deleted first, no 409; the takeover
counted in the metrics). As processes: two ``python -m arcflow.listener`` replicas share four
scale sets; the one holding half of them is SIGKILLed during a burst of 320 jobs; the other
takes its sets over with no 409, and every job reaches the stream and the ERS exactly once.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import nats
import nats.js.errors
import pytest

from arcflow.common.actions import ActionsClient, PatCredentials, RetryPolicy
from arcflow.common.events import JobsBatch, parse_event
from arcflow.listener.app import Listener
from arcflow.listener.lease import (
    LEASES_BUCKET,
    LeaseRecord,
    LeaseStore,
    LeaseTiming,
    ReplicaSettings,
)
from arcflow.listener.sessions import SessionRecord, SessionStore

from .helpers import ARS, ListenerRig, RunningListener, Variant, eventually, ready, stream_events
from .test_crash_process import _env, _reap, _spawn
from .test_takeover import remembered

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMING = LeaseTiming(ttl=1.5, renew_every=0.5, check_every=0.1, defer=0.5)


async def lease_holders(nats_url: str) -> dict[int, str]:
    """Scale set id -> holder, as the leases bucket holds them."""
    nc = await nats.connect(nats_url)
    try:
        try:
            kv = await nc.jetstream().key_value(LEASES_BUCKET.bucket)
        except nats.js.errors.BucketNotFoundError:  # no replica has started yet
            return {}
        try:
            keys = await kv.keys()
        except nats.js.errors.NoKeysError:
            return {}
        out = {}
        for key in keys:
            if not key.isdigit():  # replica-<n> presence keys
                continue
            try:
                entry = await kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                continue
            record = LeaseRecord.decode(entry.value)
            if record is not None:
                out[int(key)] = record.holder
        return out
    finally:
        await nc.close()


def open_sessions(rig: ListenerRig) -> dict[int, str]:
    return {
        s["id"]: s["session"]["sessionId"] for s in rig.sim.snapshot()["scaleSets"] if s["session"]
    }


async def test_a_dead_replicas_lease_and_session_are_taken_over(rig: ListenerRig) -> None:
    sim = rig.sim
    variants = [Variant("cpu", 0, 10), Variant("gpu", 0, 10)]
    token, ids = await rig.register(variants)
    dead_holder = "dead-pod/0"
    # The dead replica 0 held both sets and left an open GitHub session for "cpu".
    nc = await nats.connect(rig.nats_url)
    try:
        js = nc.jetstream()
        leases, sessions = await LeaseStore.open(js), await SessionStore.open(js)
        for sid in ids.values():
            assert await leases.claim(sid, LeaseRecord(dead_holder, TIMING.ttl), 0)
        async with ActionsClient(
            sim.config_url(), PatCredentials(token), retry=RetryPolicy.fast()
        ) as client:
            stale = await client.create_message_session(ids["cpu"], "dead-pod-owner")
        await sessions.remember(
            ids["cpu"], SessionRecord(stale.session_id, "dead-pod-owner", dead_holder)
        )
    finally:
        await nc.close()

    config = rig.config(token, variants, ids, metrics_addr="127.0.0.1:0")
    options = rig.options(replicas=ReplicaSettings(2, 1), lease_timing=TIMING, host="pod-b")
    listener = Listener(config, options=options)
    async with RunningListener(listener):
        live = await eventually(
            lambda: ready(open_sessions(rig)),
            lambda s: len(s) == 2 and stale.session_id not in s.values(),
            within=30,
        )
        assert await lease_holders(rig.nats_url) == dict.fromkeys(ids.values(), "pod-b/1")
        sim.enqueue_jobs(3, ["self-hosted-gpu"])
        await eventually(lambda: rig.ers_specs(variants), lambda s: s["gpu"].get("replicas") == 3)
        assert listener.metrics_port is not None
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{listener.metrics_port}/metrics")).text
        for variant in variants:
            name = f'name="{variant.ers(ARS)}"'
            assert any(
                line.startswith("arcflow_listener_lease_held{")
                and name in line
                and line.endswith(" 1.0")
                for line in text.splitlines()
            ), text
            assert any(
                line.startswith("arcflow_listener_takeovers_total{")
                and name in line
                and line.endswith(" 1.0")
                for line in text.splitlines()
            ), text
    # Shutdown: sessions deleted, leases released.
    assert open_sessions(rig) == {}
    assert await lease_holders(rig.nats_url) == {}
    creates = sim.requests_matching("*/runnerscalesets/*/sessions", method="POST")
    assert sorted(r.status for r in creates) == [200, 200, 200]  # the stale one + two, no 409
    deleted = sim.requests_matching(f"*/sessions/{stale.session_id}", method="DELETE")
    assert [r.status for r in deleted] == [204]
    assert set(live) == set(ids.values())


async def test_bad_replica_settings_are_a_configuration_error(rig: ListenerRig) -> None:
    from arcflow.listener.config import ConfigError

    token, ids = await rig.register([Variant("cpu", 0, 1)])
    config = rig.config(token, [Variant("cpu", 0, 1)], ids)
    for environ in (
        {"ARCFLOW_LISTENER_REPLICAS": "3"},
        {"ARCFLOW_LISTENER_REPLICAS": "2", "ARCFLOW_LISTENER_REPLICA": "2"},
        {"ARCFLOW_LISTENER_REPLICAS": "two"},
    ):
        with pytest.raises(ConfigError, match="ARCFLOW_LISTENER_REPLICA"):
            Listener(config, options=rig.options(environ=environ))


VARIANTS = [Variant(name, 0, 100) for name in ("cpu", "gpu", "arm", "mem")]
BURST_PER_VARIANT = 80


async def _stored_batches(nats_url: str, namespace: str, variant: str) -> list[JobsBatch]:
    out = []
    for _headers, data in await stream_events(nats_url, f"arc.jobs.{namespace}.{ARS}.{variant}"):
        event = parse_event(data)
        assert isinstance(event, JobsBatch)
        out.append(event)
    return out


async def test_killing_a_replica_during_a_burst_hands_its_sets_to_the_other(
    rig: ListenerRig, tmp_path: Path
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    config_path = tmp_path / "config.json"
    config_path.write_text(rig.config(token, VARIANTS, ids).to_json())

    def env(replica: int) -> dict[str, str]:
        return _env(
            config_path,
            rig.nats_url,
            rig.kubeconfig,
            ARCFLOW_LISTENER_REPLICAS="2",
            ARCFLOW_LISTENER_REPLICA=str(replica),
        )

    a = await _spawn(env(0), tmp_path / "a.log")
    b = await _spawn(env(1), tmp_path / "b.log")
    try:
        holders = await eventually(
            lambda: lease_holders(rig.nats_url),
            lambda h: len(h) == 4 and sorted(h.values()).count(sorted(h.values())[0]) == 2,
            within=30,
        )
        opened = await eventually(
            lambda: ready(open_sessions(rig)), lambda s: len(s) == 4, within=30
        )
        # A kill between GitHub opening a session and its record being written leaves the
        # taker nothing to delete (it then waits out the conflict: ADR 0015's window), which
        # is not what this test is about.
        await eventually(lambda: remembered(rig.nats_url), lambda r: r == opened, within=30)
        victim = {sid for sid, holder in holders.items() if holder.endswith("/0")}
        assert len(victim) == 2  # each replica owns a share
        jobs: dict[str, list[str]] = {}
        for variant in VARIANTS:
            jobs[variant.name] = sim.enqueue_jobs(BURST_PER_VARIANT // 2, [variant.label])
        a.send_signal(signal.SIGKILL)  # during the burst
        assert await asyncio.wait_for(a.wait(), 10) == -signal.SIGKILL
        mark = len(sim.requests)
        for variant in VARIANTS:
            jobs[variant.name] += sim.enqueue_jobs(BURST_PER_VARIANT // 2, [variant.label])
        await eventually(
            lambda: lease_holders(rig.nats_url),
            lambda h: set(h.values()) == {holders[min(set(ids.values()) - victim)]},
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
            lambda seen: victim <= seen,
            within=30,
        )
        await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: all(s[v.name].get("replicas") == BURST_PER_VARIANT for v in VARIANTS),
            within=60,
        )
        # The killed replica comes back (a new pod) and gets its share handed back.
        a = await _spawn(env(0), tmp_path / "a2.log")
        await eventually(
            lambda: lease_holders(rig.nats_url),
            lambda h: (
                {sid for sid, holder in h.items() if holder.endswith("/0")} == victim
                and len(h) == 4
            ),
            within=30,
        )
        await eventually(lambda: ready(open_sessions(rig)), lambda s: len(s) == 4, within=30)
        for process in (a, b):
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        await _reap(a)
        await _reap(b)
    conflicts = [r for r in sim.requests if r.status == 409]
    assert conflicts == []  # never two live sessions for one scale set
    for variant in VARIANTS:
        stored = await _stored_batches(rig.nats_url, rig.namespace, variant.name)
        message_ids = [batch.message_id for batch in stored]
        assert len(message_ids) == len(set(message_ids))
        seen = [(job.message_type, job.job_id) for batch in stored for job in batch.jobs]
        assert len(seen) == len(set(seen)), variant.name  # no job handled twice
        assigned = sorted(j for t, j in seen if t == "JobAssigned")
        assert assigned == sorted(jobs[variant.name]), variant.name  # none lost
    for log_name in ("a.log", "b.log", "a2.log"):
        assert token not in (tmp_path / log_name).read_text()
