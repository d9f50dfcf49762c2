"""The session's own statistics are scaled for before the first long poll, as upstream's
listener does (docs/upstream-behaviour.md#listener-session): jobs queued before the listener
started get their ERS replicas without waiting for a message.

World state only: the fault proxy in front of the real kube-apiserver holds one set's ERS
patches, and the simulator counts message polls as they arrive. While that set's first patch
is held, its sibling (whose patches pass) polls again and again, and the held set has not
polled once; released, the patch lands and only then does the held set poll."""

from __future__ import annotations

import pytest

from arcflow.common.events import ScaleDecision, parse_event
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.listener.app import Listener

from .helpers import ARS, ListenerRig, RunningListener, Variant, eventually, ready, stream_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

CPU = Variant("cpu", 0, 10)
GPU = Variant("gpu", 0, 10)


def _polls(rig: ListenerRig, scale_set_id: int) -> int:
    for entry in rig.sim.snapshot()["scaleSets"]:
        if entry["id"] == scale_set_id:
            return int(entry["pollsReceived"])
    raise AssertionError(f"scale set {scale_set_id} not in the simulator")


async def test_queued_jobs_are_patched_before_the_first_poll(
    kube_proxy: KubeFaultProxy, rig: ListenerRig
) -> None:
    sim = rig.sim  # 1 s long polls
    token, ids = await rig.register([CPU, GPU])
    sim.enqueue_jobs(3, [CPU.label])  # assigned to cpu before any session exists
    held = kube_proxy.delay(
        None, verb="patch", resource="ephemeralrunnersets", name_prefix=CPU.ers(ARS)
    )
    listener = Listener(rig.config(token, [CPU, GPU], ids), options=rig.options())
    async with RunningListener(listener):
        try:
            await eventually(lambda: ready(held.hits), lambda hits: hits >= 1, within=30)
            # The sibling polls on (each of its polls waits up to 1 s) while cpu's session
            # statistics are still being written: cpu has not polled once.
            await eventually(
                lambda: ready(_polls(rig, ids["gpu"])), lambda polls: polls >= 3, within=30
            )
            assert _polls(rig, ids["cpu"]) == 0
            session = next(s for s in sim.snapshot()["scaleSets"] if s["id"] == ids["cpu"])
            assert session["session"] is not None  # the session exists; its poll waits
            assert (await rig.ers_specs([CPU]))["cpu"].get("replicas") in (None, 0)
        finally:
            held.remove()
        await eventually(lambda: rig.ers_specs([CPU]), lambda s: s["cpu"].get("replicas") == 3)
        await eventually(lambda: ready(_polls(rig, ids["cpu"])), lambda polls: polls >= 1)
    decisions = [
        parse_event(data)
        for _h, data in await stream_events(rig.nats_url, f"arc.scale.{rig.namespace}.{ARS}.cpu")
    ]
    first = decisions[0]
    assert isinstance(first, ScaleDecision)
    assert (first.reason, first.desired_replicas, first.assigned_jobs) == ("session", 3, 3)
