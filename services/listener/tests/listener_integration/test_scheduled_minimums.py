"""Scheduled minimums (ADR 0063) on a running listener: a window a few seconds ahead opens and
closes, the ERS follows on the next statistics tick, and nothing restarts (same process, same
GitHub message session)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import nats
import nats.errors
import pytest

from arcflow.common.events import ScaleDecision, parse_event
from arcflow.common.schedules import format_time, utc_now
from arcflow.listener.app import Listener

from .helpers import ARS, ListenerRig, RunningListener, Variant, eventually, ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CPU = Variant("cpu", 0, 10)
GPU = Variant("gpu", 0, 4)
OPENS_IN = 4.0
OPEN_FOR = 10.0


def _replicas(specs: dict[str, Any]) -> dict[str, int]:
    return {name: spec.get("replicas") or 0 for name, spec in specs.items()}


async def test_a_window_opens_and_closes_without_a_restart(rig: ListenerRig) -> None:
    sim = rig.sim  # 1 s long polls: a statistics tick per second
    token, ids = await rig.register([CPU, GPU])
    # Whole seconds (what RFC 3339 in the spec carries here), so the bounds are exact.
    opens = (utc_now() + timedelta(seconds=OPENS_IN)).replace(microsecond=0)
    closes = opens + timedelta(seconds=OPEN_FOR)
    window = {
        "startTime": format_time(opens).replace("Z", "+00:00"),
        "endTime": format_time(closes),
        "minRunners": 3,
        "source": "spec.scheduledOverrides[0]",
    }
    config = rig.config(token, [CPU, GPU], ids)
    entries = [
        entry.model_copy(update={"scheduled_overrides": [window]})
        if entry.ephemeral_runner_set_name == CPU.ers(ARS)
        else entry
        for entry in config.scale_sets or []
    ]
    config = config.model_copy(update={"scale_sets": entries})
    listener = Listener(config, options=rig.options())
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.snapshot()),
            lambda snap: all(s["session"] is not None for s in snap["scaleSets"]),
        )
        sessions = {s["id"]: s["session"]["sessionId"] for s in sim.snapshot()["scaleSets"]}
        assert _replicas(await rig.ers_specs([CPU, GPU])) == {"cpu": 0, "gpu": 0}

        await eventually(
            lambda: rig.ers_specs([CPU, GPU]),
            lambda s: _replicas(s) == {"cpu": 3, "gpu": 0},
            within=OPENS_IN + OPEN_FOR,
        )
        opened_at = utc_now()
        assert opened_at >= opens, "the minimum moved before the window opened"

        await eventually(
            lambda: rig.ers_specs([CPU, GPU]),
            lambda s: _replicas(s) == {"cpu": 0, "gpu": 0},
            within=OPEN_FOR + 15,
        )
        assert utc_now() >= closes, "the minimum dropped before the window closed"
        # No restart: the same sessions serve both scale sets throughout.
        assert {s["id"]: s["session"]["sessionId"] for s in sim.snapshot()["scaleSets"]} == (
            sessions
        )
        assert [u.decider.scaler.min_runners for u in listener.units] == [0, 0]

    decisions = await _decisions(rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.cpu")
    minimums = [d.min_runners for d in decisions]
    assert 3 in minimums
    assert minimums[-1] == 0
    reasons = [d.reason for d in decisions if d.min_runners == 3]
    assert all("from spec.scheduledOverrides[0]" in r for r in reasons), reasons


async def _decisions(url: str, subject: str) -> list[ScaleDecision]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        sub = await js.subscribe(subject, ordered_consumer=True)
        found: list[ScaleDecision] = []
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                return found
            event = parse_event(msg.data)
            assert isinstance(event, ScaleDecision)
            found.append(event)
    finally:
        await nc.close()
