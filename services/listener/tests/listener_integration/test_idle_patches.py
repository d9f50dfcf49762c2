"""At idle every empty long poll gives a statistics tick; an unchanged count is not patched
again within the window (issue 11 item 4, ADR 0043 as amended in ADR 0104), and the forced
state (patchID 0) the ERS holds is not patched again at all (ADR 0119), so an idle listener
does not write to the API server once per poll."""

from __future__ import annotations

import pytest

from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.listener.app import Listener

from .helpers import ListenerRig, RunningListener, Variant, eventually, ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


async def test_identical_idle_patches_are_not_repeated(
    kube_proxy: KubeFaultProxy, rig: ListenerRig
) -> None:
    """The listener talks to the real server through the proxy, which counts its patches."""
    sim = rig.sim  # 1 s long polls
    variants = [Variant("cpu", 0, 10)]
    token, ids = await rig.register(variants)
    ers_path = f"/namespaces/{rig.namespace}/ephemeralrunnersets/arc-cpu"
    listener = Listener(rig.config(token, variants, ids), options=rig.options())
    async with RunningListener(listener):
        await eventually(
            lambda: ready(sim.requests_matching(f"*/runnerscalesets/{ids['cpu']}/messages", "GET")),
            # Past the 30 s window of ADR 0043, after which an unchanged count used to be
            # sent again (about 38 polls of 1 s; a loaded machine only makes it longer).
            lambda polls: len(polls) >= 38,
            within=90,
        )
        decider = listener.units[0].decider
        # Not sent: skipped as an unchanged count (ADR 0043), or as the identical patch.
        assert decider.unchanged_batches + decider.ers.patches_skipped >= 30
    patches = [r for r in kube_proxy.requests if r.method == "PATCH" and r.path.endswith(ers_path)]
    # The session's first forced patchID 0, and never again while nothing changes.
    assert len(patches) == 1
    assert {(r.content_type, r.status) for r in patches} == {("application/merge-patch+json", 200)}
    assert (await rig.ers_specs(variants))["cpu"]["patchID"] == 0
