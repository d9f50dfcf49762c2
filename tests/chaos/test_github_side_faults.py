"""A scale set deleted on the GitHub side in the middle of a burst (issue #23, ARC #4571's
case): the simulator drops the ``gpu`` variant's scale set, its session and idle runners, and
puts its jobs not started back in the queue, without telling arcflow. The registrar must
register it again under the same name (its JIT requests get 404), the reconciler must mirror
the new id into the ARS annotation, the ERS and the listener, and every job must complete once,
with one scale set per name in the end (ADR 0064)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from arcflow.devstack.control_plane import ControlPlane
from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import Burst, figures_after, report

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

DELETED = "gpu"
JOBS = 150


async def test_scale_set_deleted_on_github_mid_burst_is_registered_again(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube) as stack:
        sim = stack.sim
        assert sim is not None
        target = next(t for t in stack.targets if t.variant == DELETED)
        old_id = stack.scale_set_id(target)
        burst = Burst(stack)
        began = time.monotonic()
        burst.enqueue(JOBS)
        await burst.wait_completed(JOBS // 3, within=150)
        sim.delete_scale_set_behind(old_id)
        deleted_at = time.monotonic()

        new_id = await stack.registered_again(target, old_id, within=60)
        reregistered_after = time.monotonic() - deleted_at
        await stack.wait_id_mirrored(DELETED, new_id, within=60)
        await stack.wait_sessions(within=60)
        session_after = time.monotonic() - deleted_at
        await burst.wait_completed(JOBS, within=180)
        figures = await figures_after(burst, last_event=deleted_at)
        report(
            "scale set deleted on GitHub mid-burst",
            began,
            {"registered again": round(reregistered_after, 2), "session": session_after},
            figures,
        )
        print(json.dumps({"old id": old_id, "new id": new_id}))
        assert new_id != old_id
        assert figures.problems() == []
