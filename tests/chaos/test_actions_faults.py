"""GitHub misbehaves for one variant while its siblings keep scaling.

First the gpu variant's scale set answers every call with 503 (sessions, message polls, JIT
configs) until the two sibling variants have finished all their jobs: they must not wait for
it. Then, while gpu catches up: a 429 burst with Retry-After, a 5xx burst, message-queue
tokens expiring (401), a session lost on refresh (404) whose re-creation first meets 409,
and slow polls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import Burst, figures_after, report
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

JOBS = 300
BROKEN = "gpu"


async def test_actions_faults_on_one_variant_while_siblings_scale(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path) as stack:
        sim = stack.sim
        assert sim is not None
        target = next(t for t in stack.targets if t.variant == BROKEN)
        (scale_set_id,) = [
            s["id"] for s in stack.scale_sets() if s["name"] == target.scale_set_name
        ]
        route = f"*/runnerscalesets/{scale_set_id}/*"

        began = time.monotonic()
        burst = Burst(stack)
        burst.enqueue(JOBS)
        await burst.wait_completed(JOBS // 6, within=120)
        outage = sim.inject_status(route, 503, times=10**6, message="chaos: gpu is down")
        outage_began = time.monotonic()
        siblings = [j for j, v in burst.jobs.items() if v != BROKEN]
        broken = [j for j, v in burst.jobs.items() if v == BROKEN]

        def done(jobs: list[str]) -> int:
            return sum(1 for j in jobs if sim.engine.job(j).state.value == "completed")

        async def siblings_done() -> bool:
            assert done(siblings) == len(siblings), f"{done(siblings)}/{len(siblings)}"
            return True

        await eventually(siblings_done, within=150, interval=0.2, what="sibling jobs done")
        siblings_seconds = round(time.monotonic() - outage_began, 1)
        assert outage.hits > 0, "the outage was never hit"
        broken_when_siblings_done = done(broken)
        sim.clear_faults()

        back_after: dict[str, float] = {"siblings finished during the outage": siblings_seconds}
        later = [
            ("429 burst", lambda: sim.inject_status(route, 429, times=4, retry_after=1)),
            ("5xx burst", lambda: sim.inject_status(route, 502, times=4)),
            ("401 token expiry", lambda: sim.expire_next_mq_token(times=2)),
            (
                "lost session, then 409",
                lambda: (sim.fail_session_refresh(times=1), sim.conflict_session_create(times=2)),
            ),
            ("slow polls", lambda: sim.set_slow_polls(1.0)),
        ]
        remaining = len(broken) - done(broken)
        for step, (name, inject) in enumerate(later, start=1):
            began_fault = time.monotonic()
            inject()
            want = len(broken) - remaining + remaining * step // (len(later) + 1)
            await eventually(
                lambda w=want: asyncio.sleep(0, done(broken) >= w), within=60, what=name
            )
            back_after[name] = round(time.monotonic() - began_fault, 2)
        sim.set_slow_polls(0)
        last_event = time.monotonic()
        await burst.wait_completed(JOBS, within=120)
        figures = await figures_after(burst, last_event=last_event)
        report(f"Actions faults on {BROKEN}", began, back_after, figures)
        assert broken_when_siblings_done < len(broken), "the outage did not hold gpu back"
        assert figures.problems() == []
