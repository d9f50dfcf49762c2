"""One listener, three scale sets: one whose session create keeps answering 409, one whose
session create keeps answering 500, one healthy. The healthy one scales as if alone; the two
failing ones are retried under supervision with capped exponential backoff, never faster."""

from __future__ import annotations

import time

import pytest

from arcflow.common.events import ScaleDecision, parse_event
from arcflow.devstack.actions_sim import TypeNames
from arcflow.listener.app import Listener
from arcflow.listener.supervisor import Backoff

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
BACKOFF = Backoff(initial=0.1, factor=2.0, cap=0.4, jitter=0.0)
CLIENT_RETRIES = 1  # listener_options: RetryPolicy.fast(max_retries=1)


def max_attempts_within(policy: Backoff, seconds: float) -> int:
    """The most session attempts a supervised pump can make in ``seconds`` (pure): the first
    one, plus one more after each backoff delay that fits."""
    attempts, elapsed, delay = 1, 0.0, policy.initial
    while elapsed + delay <= seconds:
        elapsed += delay
        attempts += 1
        delay = policy.next(delay)
    return attempts


def test_max_attempts_within_follows_the_backoff() -> None:
    assert max_attempts_within(BACKOFF, 0.05) == 1
    assert max_attempts_within(BACKOFF, 0.35) == 3  # 0.1 + 0.2
    assert max_attempts_within(BACKOFF, 1.3) == 5  # 0.1 + 0.2 + 0.4 + 0.4 (+0.4 > 1.3)


async def test_conflicting_and_failing_sessions_do_not_stop_the_healthy_set(
    rig: ListenerRig,
) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    conflict_route = f"*/runnerscalesets/{ids['gpu']}/sessions"
    broken_route = f"*/runnerscalesets/{ids['arm']}/sessions"
    healthy_route = f"*/runnerscalesets/{ids['cpu']}/sessions"
    sim.inject_status(
        conflict_route,
        409,
        method="POST",
        times=10_000,
        type_name=TypeNames.SESSION_CONFLICT,
        message="The actions runner scaleset already has an active session.",
    )
    sim.inject_status(broken_route, 500, method="POST", times=10_000)
    config = rig.config(token, VARIANTS, ids)
    options = rig.options(backoff=BACKOFF)
    listener = Listener(config, options=options)
    started = time.monotonic()
    async with RunningListener(listener):
        await eventually(
            lambda: ready([s["session"] is not None for s in sim.snapshot()["scaleSets"]]),
            lambda opened: sum(opened) == 1,
        )
        sim.enqueue_jobs(3, ["self-hosted-cpu"])
        sim.enqueue_jobs(2, ["self-hosted-gpu"])
        sim.enqueue_jobs(2, ["self-hosted-arm"])
        specs = await eventually(
            lambda: rig.ers_specs(VARIANTS),
            lambda s: s["cpu"].get("replicas") == 3,
        )
        units = {u.target.variant: u for u in listener.units}
        # Let both failing sets go through a few backoff rounds (0.1, 0.2, 0.4, 0.4 ...).
        await eventually(
            lambda: ready([units[v].pump_stats.failures for v in ("gpu", "arm")]),
            lambda counts: min(counts) >= 4,
        )
    elapsed = time.monotonic() - started

    # The healthy set: its own desired count, its own patch ids, session closed at the end.
    assert specs["cpu"]["replicas"] == 3
    cpu = units["cpu"]
    assert cpu.pump_stats.failures == 0
    assert cpu.pump_stats.starts == 1
    decisions = [
        parse_event(data)
        for _h, data in await stream_events(rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.cpu")
    ]
    assert all(isinstance(d, ScaleDecision) for d in decisions)
    patch_ids = [d.patch_id for d in decisions if isinstance(d, ScaleDecision)]
    assert patch_ids[0] == 0  # the first decision is forced
    numbered = [p for p in patch_ids if p]
    assert numbered == sorted(set(numbered)), patch_ids
    assert any(
        isinstance(d, ScaleDecision) and d.desired_replicas == 3 and d.reason.startswith("message ")
        for d in decisions
    )
    final = await rig.ers_specs(VARIANTS)
    assert final["cpu"]["patchID"] == patch_ids[-1]
    assert len(sim.requests_matching(healthy_route, method="POST")) == 1
    # The failing sets never scaled: no session, so no statistics and no batches.
    assert (final["gpu"].get("replicas") or 0, final["arm"].get("replicas") or 0) == (0, 0)
    for variant in ("gpu", "arm"):
        assert units[variant].decider.decisions == []

    # Retried with backoff: each failure waited the next delay (doubling, capped) ...
    for variant, status in (("gpu", "409"), ("arm", "500")):
        stats = units[variant].pump_stats
        assert status in stats.last_error
        assert stats.delays[:4] == [0.1, 0.2, 0.4, 0.4]
        # Every attempt failed (none reset the delay); the last may have been cut by the stop.
        assert stats.starts - 1 <= stats.failures <= stats.starts
        # ... so no more attempts than the backoff lets into the time the listener ran.
        assert stats.starts <= max_attempts_within(BACKOFF, elapsed), (stats.starts, elapsed)
    # One POST per attempt on 409 (a conflict is not retried by the client); 500 is retried
    # once by the HTTP client inside each attempt.
    conflicts = sim.requests_matching(conflict_route, method="POST")
    failures = sim.requests_matching(broken_route, method="POST")
    assert {r.status for r in conflicts} == {409}
    assert {r.status for r in failures} == {500}
    gpu, arm = units["gpu"].pump_stats, units["arm"].pump_stats
    assert gpu.failures <= len(conflicts) <= gpu.starts
    assert arm.failures * (1 + CLIENT_RETRIES) <= len(failures)
    assert len(failures) <= arm.starts * (1 + CLIENT_RETRIES)
