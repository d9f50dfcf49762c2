"""A scale set GitHub deletes while its variant is idle comes back without any job asking for
it (ADR 0064, amendment "Scale sets GitHub lost while idle"; ARC #4571's case).

With no job for the variant, no JIT request meets the missing scale set; what does is the
listener's session: its next create gets 404, its ``session.failed`` (reason ``not_found``)
turns the ARS's ``ListenerSessionsOpen`` condition False with reason ``ScaleSetNotFound``, and
the registrar, woken by that change, asks GitHub and registers the variant again under the same
name, long before its 300 s sweep would. A job for the variant then runs on the new scale set.
The whole stack is real processes (tests/chaos/harness.py's stack, no fault but this one).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import Burst

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(300)]

LOST = "gpu"


async def test_a_scale_set_lost_while_idle_is_registered_again_and_runs_jobs(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        sim = stack.sim
        assert sim is not None
        target = next(t for t in stack.targets if t.variant == LOST)
        old_id = stack.scale_set_id(target)
        sim.delete_scale_set_behind(old_id)
        deleted_at = time.monotonic()

        # Well inside the registrar's 300 s sweep: only the sessions' cue can do it this soon.
        new_id = await stack.registered_again(target, old_id, within=90)
        print(f"registered again {time.monotonic() - deleted_at:.1f}s after the deletion")
        await stack.wait_id_mirrored(LOST, new_id, within=60)
        await stack.wait_sessions(within=90)
        burst = Burst(stack)
        job_id = sim.enqueue_job(target.job_labels, duration=0.5, display_name="after the loss")
        burst.jobs[job_id] = LOST
        await burst.wait_completed(1, within=120)
        assert sim.engine.job(job_id).scale_set_id == new_id
        names = [s["name"] for s in stack.scale_sets()]
        assert names.count(target.scale_set_name) == 1, names
