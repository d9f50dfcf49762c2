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

import json
import time
from pathlib import Path

import pytest

from arcflow.common.constants import ANNOTATION_SCALE_SET_IDS
from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ARS_NAME, ChaosStack
from tests.chaos.outcome import Burst
from tests.polling import eventually

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(300)]

LOST = "gpu"


async def test_a_scale_set_lost_while_idle_is_registered_again_and_runs_jobs(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        sim, kube = stack.sim, stack.kube
        assert sim is not None
        assert kube is not None
        target = next(t for t in stack.targets if t.variant == LOST)
        old_id = stack.scale_set_id(target)
        sim.delete_scale_set_behind(old_id)
        deleted_at = time.monotonic()

        async def registered_again() -> int:
            ids = [s["id"] for s in stack.scale_sets() if s["name"] == target.scale_set_name]
            assert ids, f"no scale set named {target.scale_set_name}"
            assert ids != [old_id], f"scale sets named {target.scale_set_name}: {ids}"
            return int(ids[0])

        # Well inside the registrar's 300 s sweep: only the sessions' cue can do it this soon.
        new_id = await eventually(registered_again, within=90, what="the lost scale set again")
        print(f"registered again {time.monotonic() - deleted_at:.1f}s after the deletion")

        async def mirrored() -> bool:
            ars = await kube.get(AUTOSCALING_RUNNER_SET, ARS_NAME, stack.namespace)
            ids = json.loads(
                (ars["metadata"].get("annotations") or {}).get(ANNOTATION_SCALE_SET_IDS) or "{}"
            )
            assert ids.get(LOST) == new_id, f"{ANNOTATION_SCALE_SET_IDS}: {ids} (want {new_id})"
            return True

        await eventually(mirrored, within=60, what="the new id in the ARS annotations")
        await stack.wait_sessions(within=90)
        burst = Burst(stack)
        job_id = sim.enqueue_job(target.job_labels, duration=0.5, display_name="after the loss")
        burst.jobs[job_id] = LOST
        await burst.wait_completed(1, within=120)
        assert sim.engine.job(job_id).scale_set_id == new_id
        names = [s["name"] for s in stack.scale_sets()]
        assert names.count(target.scale_set_name) == 1, names
