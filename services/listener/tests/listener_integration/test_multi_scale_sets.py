"""Three variants behind one listener: own desired counts, own patchID sequences, isolation."""

from __future__ import annotations

from typing import Any

import httpx
import nats
import pytest

from arcflow.common.events import ScaleDecision, parse_event
from arcflow.listener.app import Listener

from .helpers import (
    ARS,
    ListenerRig,
    RunningListener,
    Variant,
    eventually,
    ready,
    stream_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

VARIANTS = [Variant("cpu", 0, 10), Variant("gpu", 1, 2), Variant("arm", 0, 5)]
JOBS = {"cpu": 3, "gpu": 3, "arm": 1}
EXPECTED = {"cpu": 3, "gpu": 2, "arm": 1}  # min + assigned, capped by max


def _replicas(specs: dict[str, Any]) -> dict[str, int]:
    return {name: spec.get("replicas") or 0 for name, spec in specs.items()}


async def test_each_variant_scales_its_own_ers_with_its_own_patch_ids(
    rig: ListenerRig,
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    config = rig.config(
        token,
        VARIANTS,
        ids,
        metrics_addr="127.0.0.1:0",
        metrics_endpoint="/metrics",
    )
    listener = Listener(config, options=rig.options())
    async with RunningListener(listener):
        # Every session is open before jobs arrive (direct mode assigns to listening sets).
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(s["session"] is not None for s in snap["scaleSets"]),
        )
        owners = sorted(s["session"]["ownerName"] for s in sim.snapshot()["scaleSets"])
        assert owners == sorted(f"listener-pod-{i}" for i in ids.values())
        for variant in VARIANTS:
            sim.enqueue_jobs(JOBS[variant.name], [variant.label])
        specs = await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: _replicas(s) == EXPECTED,
        )
        # Metrics: one series per variant on the shared endpoint, scraped over HTTP.
        assert listener.metrics_port is not None
        async with httpx.AsyncClient() as http:
            response = await http.get(f"http://127.0.0.1:{listener.metrics_port}/metrics")
            missing = await http.get(f"http://127.0.0.1:{listener.metrics_port}/other")
        assert response.status_code == 200
        assert missing.status_code == 404
        for variant in VARIANTS:
            series = (
                f'gha_desired_runners{{enterprise="",name="{variant.ers(ARS)}",'
                f'namespace="{rig.namespace}",organization="example-org",repository=""}} '
                f"{float(EXPECTED[variant.name])}"
            )
            assert series in response.text
        assert f'gha_min_runners{{enterprise="",name="arc-gpu",namespace="{rig.namespace}"' in (
            response.text
        )

    # Each decision ran its own sequence: its first decision forced (0), later ones numbered
    # by its own counter, and its ERS carries its own last patch id.
    by_name = {unit.target.variant: unit for unit in listener.units}
    for variant in VARIANTS:
        decider = by_name[variant.name].decider
        decisions = decider.decisions
        assert decisions[0].patch_id == 0
        numbered = [d.patch_id for d in decisions if d.patch_id]
        assert numbered == sorted(set(numbered))
        assert specs[variant.name]["patchID"] in {d.patch_id for d in decisions}
        assert decider.scaler.patch_seq == len(decisions) - 1
    sequences = {v.name: by_name[v.name].decider.scaler.patch_seq for v in VARIANTS}
    assert len(set(sequences.values())) >= 1  # independent counters (values may coincide)

    # Decisions were published per variant on arc.scale.<ns>.<ars>.<variant>.
    nc = await nats.connect(rig.nats_url)
    try:
        js = nc.jetstream()
        for variant in VARIANTS:
            last = await js.get_last_msg(
                "ARC_SCALE", f"arc.scale.{rig.namespace}.{ARS}.{variant.name}"
            )
            event = parse_event(last.data or b"")
            assert isinstance(event, ScaleDecision)
            assert event.ephemeral_runner_set == variant.ers(ARS)
            assert event.desired_replicas == EXPECTED[variant.name]
    finally:
        await nc.close()
    # One trace per batch: the decision runs in the pump's span, its event carries it.
    for variant in VARIANTS:
        batches = await stream_events(
            rig.nats_url, f"arc.jobs.{rig.namespace}.{ARS}.{variant.name}"
        )
        published = await stream_events(
            rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.{variant.name}"
        )
        batch_traces = {
            parse_event(data).message_id: headers["traceparent"].split("-")[1]  # type: ignore[attr-defined]
            for headers, data in batches
        }
        assert batch_traces, "no batch was published"
        for headers, data in published:
            event = parse_event(data)
            assert isinstance(event, ScaleDecision)
            if event.reason.startswith("message "):
                message_id = int(event.reason.split()[1])
                assert headers["traceparent"].split("-")[1] == batch_traces[message_id]
    # SIGTERM-equivalent stop deleted every session.
    assert all(s["session"] is None for s in sim.snapshot()["scaleSets"])


async def test_a_failing_session_does_not_stop_its_siblings(
    rig: ListenerRig,
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    broken = ids["gpu"]
    sim.inject_status(f"*/runnerscalesets/{broken}/sessions", 503, method="POST", times=10_000)
    config = rig.config(token, VARIANTS, ids)
    listener = Listener(config, options=rig.options())
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: sum(s["session"] is not None for s in snap["scaleSets"]) == 2,
        )
        sim.enqueue_jobs(2, ["self-hosted-cpu"])
        sim.enqueue_jobs(1, ["self-hosted-arm"])
        specs = await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: _replicas(s)["cpu"] == 2 and _replicas(s)["arm"] == 1,
        )
        gpu_unit = next(u for u in listener.units if u.target.scale_set_id == broken)
        await eventually(lambda: ready(gpu_unit.pump_stats.failures), lambda n: n >= 3)
    assert "503" in gpu_unit.pump_stats.last_error
    assert gpu_unit.pump_stats.delays[:3] == [0.05, 0.1, 0.2]  # doubling, capped at 0.2
    assert _replicas(specs)["gpu"] == 0  # never scaled: its session never opened
    healthy = [u for u in listener.units if u.target.scale_set_id != broken]
    assert all(u.pump_stats.failures == 0 for u in healthy)
