"""GitHub misbehaves for one variant in the middle of a burst while its siblings keep scaling:
a 429 burst with Retry-After, a 5xx burst, its message-queue token expiring (401), its session
lost on refresh (404) with the re-creation first meeting 409, then slow polls for the rest of
the burst.

Every fault but the last targets only the gpu variant's scale set (its sessions, message polls
and JIT configs), and the two sibling variants must keep completing jobs across the faults.
Slow polls are the simulator's global knob: all variants poll slowly, none may stop."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from arcflow.devstack.actions_sim import TypeNames
from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import Burst, figures_after, report, run_burst
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

BROKEN = "gpu"


def completed_by_variant(burst: Burst) -> dict[str, int]:
    assert burst.stack.sim is not None
    engine = burst.stack.sim.engine
    counts = {t.variant: 0 for t in burst.stack.targets}
    for job_id, variant in burst.jobs.items():
        if engine.job(job_id).state.value == "completed":
            counts[variant] += 1
    return counts


async def test_actions_faults_on_one_variant_while_siblings_scale(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        sim = stack.sim
        assert sim is not None
        target = next(t for t in stack.targets if t.variant == BROKEN)
        scale_set_id = stack.scale_set_id(target)
        scale_set = f"*/runnerscalesets/{scale_set_id}"
        route = scale_set + "/*"
        rules = []
        progress: list[dict[str, int]] = []
        burst = Burst(stack)

        def fault(
            inject: Callable[[], object], back: Callable[[], Awaitable[None]] | None = None
        ) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                progress.append(completed_by_variant(burst))
                inject()
                if back is not None:
                    await back()

            return run

        def polls_answered() -> int:
            return sum(
                1
                for r in sim.requests_matching(scale_set + "/messages*", method="GET")
                if r.status in (200, 202)
            )

        async def polling_again() -> None:
            # The broken part is back once every rule of the fault was used up and the
            # listener's pump then got an answer to a message poll again (its supervisor
            # retries a failed session with back-off from 1 s, capped at 5 s: ADR 0044).
            pending = list(rules)

            async def used_up() -> bool:
                return all(r.hits >= r.times for r in pending)

            await eventually(used_up, within=90, what=f"the faults on {BROKEN} used up")
            answered = polls_answered()

            async def polled() -> bool:
                return polls_answered() > answered

            await eventually(polled, within=60, what=f"{BROKEN} polling again")

        def expire_token() -> None:
            # What the message queue answers once the session's token expired.
            rules.append(sim.inject_status(scale_set + "/messages*", 401, times=2))

        def lose_session() -> None:
            # An expired token makes the listener refresh its session: the refresh finds it
            # gone (404), and the new session first meets 409 (the old one still "active").
            sessions = scale_set + "/sessions"
            rules.append(
                sim.inject_status(
                    sessions + "/*", 404, method="PATCH", type_name=TypeNames.SESSION_NOT_FOUND
                )
            )
            rules.append(
                sim.inject_status(
                    sessions, 409, method="POST", times=2, type_name=TypeNames.SESSION_CONFLICT
                )
            )
            expire_token()

        faults = [
            (
                "429 burst",
                fault(lambda: rules.append(sim.inject_status(route, 429, times=6, retry_after=1))),
            ),
            ("5xx burst", fault(lambda: rules.append(sim.inject_status(route, 502, times=6)))),
            ("401 token expiry", fault(expire_token)),
            ("lost session, then 409", fault(lose_session, polling_again)),
            ("slow polls", fault(lambda: sim.set_slow_polls(1.0))),
        ]
        began = time.monotonic()
        burst, back_after, last_event = await run_burst(stack, faults, burst=burst)
        progress.append(completed_by_variant(burst))
        sim.set_slow_polls(0)
        figures = await figures_after(burst, last_event=last_event)
        report(f"Actions faults on {BROKEN}", began, back_after, figures)
        print(
            json.dumps(
                {
                    "completed per variant at each fault": progress,
                    "route faults hit": [r.hits for r in rules],
                }
            )
        )
        assert all(r.hits for r in rules), "a fault was never hit"
        # A sibling may pause while it waits for finished runners to be removed (it is at
        # maxRunners), never through two faults in a row.
        for before, after in zip(progress, progress[2:], strict=False):
            for variant in (t.variant for t in stack.targets if t.variant != BROKEN):
                assert after[variant] > before[variant], f"{variant} stalled: {progress}"
        assert figures.problems() == []
