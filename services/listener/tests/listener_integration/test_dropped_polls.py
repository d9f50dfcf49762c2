"""A connection closed in the middle of a long poll (the broker's EOF, upstream #4488), with one
scale set (the mode upstream ends the process in). A poll cut off once is retried by the client
and the session survives: the same session polls on and the pump never fails. Polls cut off past
the client's retry budget (2 attempts in this rig) fail the pump, whose supervisor opens a new
session: the listener keeps running and jobs queued after either fault scale the set."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.devstack.actions_sim import DROPPED, ActionsSimulator, RequestRecord
from arcflow.listener.app import Listener

from .helpers import ListenerRig, RunningListener, Variant, eventually, ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

VARIANTS = [Variant("cpu", 0, 5)]


def _session(sim: ActionsSimulator) -> dict[str, Any] | None:
    session: dict[str, Any] | None = sim.snapshot()["scaleSets"][0]["session"]
    return session


async def _cut_off(sim: ActionsSimulator, polls: str, times: int) -> RequestRecord:
    """Cut ``times`` polls off mid-poll; returns the first poll answered after them."""
    before = len([r for r in sim.requests_matching(polls) if r.status == DROPPED])
    sim.drop_polls(times=times, after=0.3)
    dropped = await eventually(
        lambda: ready([r for r in sim.requests_matching(polls) if r.status == DROPPED]),
        lambda found: len(found) >= before + times,
        within=30,
    )
    answered = await eventually(
        lambda: ready([r for r in sim.requests_matching(polls) if r.at > dropped[-1].at]),
        bool,
        within=30,
    )
    return answered[0]


async def test_a_poll_cut_off_mid_poll_keeps_the_session(rig: ListenerRig) -> None:
    sim = rig.sim
    token, ids = await rig.register(VARIANTS)
    config = rig.single_config(token, VARIANTS[0], ids)
    listener = Listener(config, options=rig.options())
    assert not listener.multi
    polls = f"*/runnerscalesets/{ids['cpu']}/messages*"
    async with RunningListener(listener) as running:
        first = await eventually(lambda: ready(_session(sim)), bool, within=30)
        # Once: the client's retry carries the same session on.
        after = await _cut_off(sim, polls, times=1)
        assert after.status in (200, 202), after
        sim.enqueue_jobs(2, [VARIANTS[0].label])
        await eventually(
            lambda: rig.ers_specs(VARIANTS), lambda s: s["cpu"].get("replicas") == 2, within=30
        )
        assert _session(sim) == first, "a new session was created"
        assert running.units[0].pump_stats.failures == 0, running.units[0].pump_stats
        # Past the retry budget: the pump fails, its supervisor opens a new session.
        await _cut_off(sim, polls, times=3)
        second = await eventually(
            lambda: ready(_session(sim)), lambda s: s is not None and s != first, within=30
        )
        sim.enqueue_jobs(1, [VARIANTS[0].label])
        await eventually(
            lambda: rig.ers_specs(VARIANTS), lambda s: s["cpu"].get("replicas") == 3, within=30
        )
        assert _session(sim) == second
        assert running.units[0].pump_stats.failures >= 1, running.units[0].pump_stats
