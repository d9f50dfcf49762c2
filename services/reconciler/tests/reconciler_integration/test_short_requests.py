"""A scale request the set's shared capacity holds back goes on without a new patchID, and
stops at the count it asked for (ADR 0110).

The listener does not send a new patchID for an unchanged count (as upstream's skips it), so a
request cut short by ``capacity.maxRunners`` must be finished by the runner set itself as
finished runners free room; and, since finished runners are what frees the room, it must not
top them up past what it asked for either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arcflow.reconciler.controllers.runner_claims import ANNOTATION_REQUEST_OWED
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

FINISHED = {
    "phase": "Succeeded",
    "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
}


async def _owed(stack: Stack) -> dict[str, Any] | None:
    ers = await stack.kube.get("EphemeralRunnerSet", "short", stack.namespace)
    raw = (ers["metadata"].get("annotations") or {}).get(ANNOTATION_REQUEST_OWED)
    return None if raw is None else dict(json.loads(raw))


async def test_a_short_request_finishes_as_room_frees_and_never_tops_up(stack: Stack) -> None:
    await stack.register("short", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "short", capacity={"maxRunners": 2}))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers, what="the runner set")
    seen: set[str] = set()

    async def live(count: int) -> list[str] | None:
        names = [r["metadata"]["name"] for r in await stack.list("EphemeralRunner")]
        seen.update(names)
        return sorted(names) if len(names) == count else None

    # One request (patchID 5) for four runners; the budget has room for two.
    await stack.scale("short", 4, 5)
    first = await eventually(lambda: live(2), what="the two runners the budget has room for")

    async def owes(count: int) -> bool:
        owed = await _owed(stack)
        return owed == {"patch": 5, "replicas": 4, "owed": count}

    await eventually(lambda: owes(2), what="the set's annotation: patch 5 owes 2 runners")

    # Each finished runner frees room: the same request creates the next, no new patchID.
    await stack.set_pod_status(first[0], FINISHED)
    await eventually(lambda: owes(1), what="a third runner created, the request owes 1")
    await eventually(lambda: live(2), what="two live runners after the first finished")
    await stack.set_pod_status(first[1], FINISHED)
    await eventually(lambda: _no_owed(stack), what="the fourth runner: the request served")
    third_and_fourth = await eventually(lambda: live(2), what="the third and fourth runners")
    assert len(seen) == 4, sorted(seen)

    # The request had its four: finished runners now are not topped up (GitHub's count, and the
    # listener's replicas, still include their jobs until the listener hears they completed).
    await stack.set_pod_status(third_and_fourth[0], FINISHED)
    await eventually(lambda: live(1), what="the finished third runner gone")
    await stack.wait_idle()
    assert len(await stack.list("EphemeralRunner")) == 1
    assert len(seen) == 4, sorted(seen)
    spec = (await stack.kube.get("EphemeralRunnerSet", "short", stack.namespace))["spec"]
    assert (spec.get("replicas"), spec.get("patchID")) == (4, 5)  # no new request was needed


async def _no_owed(stack: Stack) -> bool:
    return await _owed(stack) is None
