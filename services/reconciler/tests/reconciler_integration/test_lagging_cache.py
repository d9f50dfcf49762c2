"""A cache that lags by seconds never makes the reconciler delete a busy runner (issue 11).

The EphemeralRunner part of the reconciler's cache is held back 3 s; a runner takes a job
(the listener writes its status) and the set is deleted right away. The clean-up judges the
runners from the stale copy (the job is not visible yet), but its deletes carry the judged
resourceVersion: the busy runner's delete gets 409, its copy is refreshed, and it is kept.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration


async def _runners(stack: Stack) -> list[dict[str, Any]]:
    return await stack.list("EphemeralRunner")


async def test_a_lagging_cache_never_deletes_a_busy_runner(stack: Stack) -> None:
    await stack.register("lag", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "lag"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers)
    await stack.scale("lag", 3, 1)

    async def registered() -> list[dict[str, Any]] | None:
        runners = await _runners(stack)
        ok = len(runners) == 3 and all((r.get("status") or {}).get("runnerId") for r in runners)
        return runners if ok else None

    runners = await eventually(registered)
    await stack.wait_idle()
    busy = runners[0]["metadata"]["name"]
    busy_id = runners[0]["status"]["runnerId"]
    stack.rpc.busy_runner_ids.add(busy_id)  # GitHub would refuse to remove it as well
    for informer in stack.app.cache.informers_of("EphemeralRunner"):
        informer.delay_seconds = 3.0

    # The listener marks the runner busy; the set is deleted at once.
    await stack.kube.patch_status(
        "EphemeralRunner",
        busy,
        {"phase": "Running", "jobId": "job-1", "jobRequestId": 1},
        namespace=stack.namespace,
    )
    await stack.kube.delete("EphemeralRunnerSet", "lag", namespace=stack.namespace)

    async def idle_ones_gone() -> bool:
        return {r["metadata"]["name"] for r in await _runners(stack)} == {busy}

    await eventually(idle_ones_gone, within=20)
    live = await stack.kube.get("EphemeralRunner", busy, stack.namespace)
    assert not live["metadata"].get("deletionTimestamp"), "a busy runner was deleted"
    assert busy_id not in stack.rpc.removed
