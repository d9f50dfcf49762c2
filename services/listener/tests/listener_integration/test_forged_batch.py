"""A forged ``jobs.batch`` (message id 10^12) cannot stop a variant, before or after a SIGKILL.

Issue 12 item 2: the listener once skipped every later batch as "already handled" and restored
the forged number after a restart. Since ADR 0104 it reads no batch back from the stream: its
pump decides each batch it stored itself, with the sequence JetStream's PubAck gave it, so
forged and unparseable messages on its subject are never acted on, later real batches still
scale, and a killed and restarted process (which resumes from its own last ``scale.decision``)
scales too. Real ``python -m arcflow.listener`` processes.
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import nats
import pytest

from arcflow.common.events import JobsBatch, parse_event
from tests.flow.test_poison_messages import POISON

from .helpers import ARS, ListenerRig, Variant, eventually, ready, stream_events
from .test_crash_process import _env, _reap, _spawn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

VARIANTS = [Variant("cpu", 0, 20)]
FORGED_ID = 10**12


async def _publish(nats_url: str, subject: str, batch: JobsBatch, msg_id: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().publish(
            subject, batch.model_dump_json().encode(), headers={"Nats-Msg-Id": msg_id}
        )
    finally:
        await nc.close()


async def _publish_raw(nats_url: str, subject: str, payload: bytes, msg_id: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().publish(subject, payload, headers={"Nats-Msg-Id": msg_id})
    finally:
        await nc.close()


async def test_forged_batches_are_never_acted_on_and_never_stop_the_variant(
    rig: ListenerRig, tmp_path: Path
) -> None:
    sim = rig.sim
    sim.set_session_idle_timeout(1.0)  # the killed process's session lapses quickly
    token, ids = await rig.register(VARIANTS)
    config_path = tmp_path / "config.json"
    config_path.write_text(rig.config(token, VARIANTS, ids).to_json())
    env = _env(config_path, rig.nats_url, rig.kubeconfig)
    subject = f"arc.jobs.{rig.namespace}.{ARS}.cpu"

    async def replicas_become(n: int) -> None:
        await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: s["cpu"].get("replicas") == n,
            within=30,
        )

    first = await _spawn(env, tmp_path / "1.log")
    second: asyncio.subprocess.Process | None = None
    try:
        await eventually(lambda: ready(sim.snapshot()["scaleSets"][0]["session"]), bool, within=30)
        sim.enqueue_jobs(1, ["self-hosted-cpu"])
        await replicas_become(1)
        real = [parse_event(d) for _h, d in await stream_events(rig.nats_url, subject)]
        genuine = real[-1]
        assert isinstance(genuine, JobsBatch)
        assert genuine.session_id

        # Schema-valid forgeries: one claiming the live session, one of no session.
        huge = genuine.statistics.model_copy(update={"total_assigned_jobs": 7})
        claims_live = genuine.model_copy(
            update={"id": "forged-1", "message_id": FORGED_ID, "statistics": huge}
        )
        no_session = claims_live.model_copy(update={"id": "forged-2", "session_id": ""})
        await _publish(rig.nats_url, subject, claims_live, "forged-1")
        await _publish(rig.nats_url, subject, no_session, "forged-2")
        # Unparseable payloads on the listener's own subject.
        for case, (payload, _words) in POISON.items():
            await _publish_raw(rig.nats_url, subject, payload, f"poison-{case}")

        sim.enqueue_jobs(2, ["self-hosted-cpu"])
        await replicas_become(3)

        first.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL
        second = await _spawn(env, tmp_path / "2.log")
        await eventually(lambda: ready(sim.snapshot()["scaleSets"][0]["session"]), bool, within=30)
        sim.enqueue_jobs(2, ["self-hosted-cpu"])
        await replicas_become(5)
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 20) == 0
    finally:
        await _reap(first)
        if second is not None:
            await _reap(second)

    # No decision was taken on a forged batch; the ERS ends on the real count.
    decisions = await stream_events(rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.cpu")
    assert not [h for h, _d in decisions if h.get("Arcflow-Github-Message-Id") == str(FORGED_ID)]
    desired = [event.desired_replicas for _h, d in decisions if (event := parse_event(d))]
    assert 7 not in desired  # the forged statistics' count was never asked for
    specs = await rig.ers_specs(VARIANTS)
    assert specs["cpu"]["replicas"] == 5
    first_log, second_log = (tmp_path / "1.log").read_text(), (tmp_path / "2.log").read_text()
    log_text = first_log + second_log
    # The old bug took the forged number for handled and skipped every later real batch. What
    # may be skipped is only a real message the first process decided on just before its
    # SIGKILL and had not yet acknowledged on GitHub, which comes again to the second process.
    assert "already handled" not in first_log
    skipped = {
        int(m) for m in re.findall(r"message (\d+) of \S+ \(\d+\) already handled", second_log)
    }
    decided_first = {int(m) for m in re.findall(r"assigned jobs, message (\d+)\)", first_log)}
    assert skipped <= decided_first, f"skipped as handled: {skipped}; decided: {decided_first}"
    assert token not in log_text
