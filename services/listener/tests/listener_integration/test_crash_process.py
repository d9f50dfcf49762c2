"""Publish before ack on a real process: the listener dies between the PubAck and GitHub's ack
(``crashing_listener.py``: the listener process with the fault injected by the test, not a
switch of the product, ADR 0082), is restarted as ``python -m arcflow.listener``, and loses no
job and scales nothing twice.

Two ways to die, both after the PubAck and before the batch is decided (ADR 0104: the pump
decides in its own task, after the hook): SIGKILL from outside while the pump holds at a
barrier file, and ``os._exit(137)`` right after the PubAck. The restarted process decides the
redelivered message once: JetStream answers its re-publish with the stored copy's sequence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from arcflow.common.events import JobsBatch, ScaleDecision, parse_event
from arcflow.common.kube import KubeClient

from .crashing_listener import CRASH_AFTER_PUBLISH_ENV, CRASH_BARRIER_ENV, CRASH_EXIT_CODE
from .helpers import (
    ARS,
    ListenerRig,
    Variant,
    eventually,
    ready,
    stream_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

VARIANTS = [Variant("cpu", 0, 10)]


def _env(config_path: Path, nats_url: str, kubeconfig: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASH_")}
    env.update(
        {
            "LISTENER_CONFIG_PATH": str(config_path),
            "ARCFLOW_NATS_URL": nats_url,
            "ARCFLOW_KUBE_KUBECONFIG": str(kubeconfig),
            **extra,
        }
    )
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


CRASHING_LISTENER = Path(__file__).with_name("crashing_listener.py")


async def _spawn(
    env: dict[str, str], log_path: Path, *, crashing: bool = False
) -> asyncio.subprocess.Process:
    command = [str(CRASHING_LISTENER)] if crashing else ["-m", "arcflow.listener"]
    with log_path.open("ab") as log_file:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
        )


async def _reap(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _watch_ers(kube: KubeClient, namespace: str, seen: list[tuple[int, int]]) -> None:
    """Record every (patchID, replicas) the ERS goes through, as a watch delivers them.

    A BOOKMARK (the server's progress note, sent when it chooses) carries no spec: it is not
    a state of the ERS."""
    stream = kube.watch("EphemeralRunnerSet", namespace=namespace)
    async with stream:
        async for event in stream:
            if event.type == "BOOKMARK":
                continue
            spec = event.object.get("spec") or {}
            seen.append((int(spec.get("patchID") or 0), int(spec.get("replicas") or 0)))


async def _decisions(nats_url: str, namespace: str) -> list[tuple[dict[str, str], ScaleDecision]]:
    out = []
    for headers, data in await stream_events(nats_url, f"arc.scale.{namespace}.{ARS}.cpu"):
        event = parse_event(data)
        assert isinstance(event, ScaleDecision)
        out.append((headers, event))
    return out


async def _batches(nats_url: str, namespace: str) -> list[JobsBatch]:
    out = []
    for _headers, data in await stream_events(nats_url, f"arc.jobs.{namespace}.{ARS}.cpu"):
        event = parse_event(data)
        assert isinstance(event, JobsBatch)
        out.append(event)
    return out


@pytest.mark.parametrize("death", ["sigkill-at-barrier", "exit-137"])
async def test_a_killed_listener_loses_no_job_and_scales_nothing_twice(
    death: str,
    rig: ListenerRig,
    tmp_path: Path,
) -> None:
    sim = rig.sim
    sim.set_session_idle_timeout(1.0)  # the killed process's session lapses quickly
    nats_url = rig.nats_url
    token, ids = await rig.register(VARIANTS)
    scale_set_id = ids["cpu"]
    config_path = tmp_path / "config.json"
    config_path.write_text(rig.config(token, VARIANTS, ids).to_json())
    kubeconfig = rig.kubeconfig
    barrier = tmp_path / "crash-barrier"
    crash_env = {CRASH_AFTER_PUBLISH_ENV: "1"}
    if death == "sigkill-at-barrier":
        crash_env[CRASH_BARRIER_ENV] = str(barrier)
    ers_seen: list[tuple[int, int]] = []
    watcher = asyncio.ensure_future(_watch_ers(rig.kube, rig.namespace, ers_seen))
    first = await _spawn(
        _env(config_path, nats_url, kubeconfig, **crash_env), tmp_path / "1.log", crashing=True
    )
    second: asyncio.subprocess.Process | None = None
    try:
        await eventually(lambda: ready(sim.snapshot()["scaleSets"][0]["session"]), bool, within=30)
        first_jobs = sim.enqueue_jobs(3, ["self-hosted-cpu"])

        if death == "sigkill-at-barrier":
            await eventually(lambda: ready(barrier.exists()), bool, within=30)
            held_set, held_message = (int(x) for x in barrier.read_text().split())
            assert held_set == scale_set_id
            first.send_signal(signal.SIGKILL)
            assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL
        else:
            assert await asyncio.wait_for(first.wait(), 30) == CRASH_EXIT_CODE
            stored = await _batches(nats_url, rig.namespace)
            assert len(stored) == 1
            held_message = stored[0].message_id
        log_text = (tmp_path / "1.log").read_text()
        assert "test fault injection: crashing after the PubAck" in log_text
        assert token not in log_text

        # GitHub never got the ack: the message is still queued for the scale set.
        queued = sim.snapshot()["scaleSets"][0]["queue"]["messageIds"]
        assert held_message in queued
        deletes = f"*/runnerscalesets/{scale_set_id}/messages/{held_message}"
        assert sim.requests_matching(deletes, method="DELETE") == []

        # Restart without the switch: the message is redelivered, re-published and acked.
        second = await _spawn(_env(config_path, nats_url, kubeconfig), tmp_path / "2.log")
        await eventually(
            lambda: ready(sim.snapshot()["scaleSets"][0]["queue"]["messageIds"]),
            lambda q: held_message not in q,
            within=30,
        )
        acked = sim.requests_matching(deletes, method="DELETE")
        assert len(acked) == 1
        assert acked[0].status < 300
        await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: s["cpu"].get("replicas") == 3,
        )
        later_jobs = sim.enqueue_jobs(2, ["self-hosted-cpu"])
        await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: s["cpu"].get("replicas") == 5,
            within=30,
        )
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 20) == 0
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        await _reap(first)
        if second is not None:
            await _reap(second)

    # The stream holds every batch once (Nats-Msg-Id de-duplication of the re-publish).
    stored = await _batches(nats_url, rig.namespace)
    message_ids = [b.message_id for b in stored]
    assert message_ids.count(held_message) == 1
    assert len(message_ids) == len(set(message_ids))
    # Every enqueued job was seen, none twice.
    job_ids = [job.job_id for batch in stored for job in batch.jobs]
    assert sorted(job_ids) == sorted(first_jobs + later_jobs)

    # One scaling decision per GitHub message: none repeated for the crashed one.
    decisions = await _decisions(nats_url, rig.namespace)
    # "message N", or "message N; count unchanged, ...: ERS not patched" (ADR 0043).
    by_message = [d.reason.split(";")[0] for _h, d in decisions if d.reason.startswith("message ")]
    assert by_message.count(f"message {held_message}") == 1  # by the second process
    assert len(by_message) == len(set(by_message))
    assert set(by_message) <= {f"message {m}" for m in message_ids}
    assert f"message {max(message_ids)}" in by_message
    for headers, decision in decisions:
        if decision.reason.startswith("message "):
            assert headers["Arcflow-Github-Message-Id"] == decision.reason.split(";")[0].split()[1]
    # The ERS went only through states the decisions asked for, ending on the last one.
    asked = {(d.patch_id, d.desired_replicas) for _h, d in decisions}
    assert ers_seen, "the ERS watch saw nothing"
    # A write that leaves (patchID, replicas) as they were (e.g. replicas 0 -> null) is not a
    # new state; only real transitions must come from a published decision.
    transitions = [s for i, s in enumerate(ers_seen) if i == 0 or s != ers_seen[i - 1]]
    assert set(transitions[1:]) <= asked, (ers_seen, asked)
    assert max(replicas for _p, replicas in ers_seen) == 5
    last = decisions[-1][1]
    assert ers_seen[-1] == (last.patch_id, last.desired_replicas)
