"""A direct edit of an EphemeralRunnerSet's runner spec (ADR 0037): idle runners are replaced
with the new spec at once, a busy one keeps its job to the end, the ARS leaves the edit alone
until its own template changes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.polling import eventually

from .harness import Stack, ars_manifest, runner_template

pytestmark = pytest.mark.integration

OLD = "ghcr.io/actions/actions-runner:latest"
EDITED = "ghcr.io/actions/actions-runner:2.330.0"
FROM_ARS = "ghcr.io/actions/actions-runner:2.331.0"


def _image(obj: dict[str, Any]) -> str:
    """The runner image of an EphemeralRunnerSet or an EphemeralRunner."""
    spec = obj["spec"].get("ephemeralRunnerSpec") or obj["spec"]
    return str(spec["spec"]["containers"][0]["image"])


async def _live_runners(stack: Stack) -> dict[str, str]:
    """name -> image of every runner not being deleted."""
    return {
        r["metadata"]["name"]: _image(r)
        for r in await stack.list("EphemeralRunner")
        if not r["metadata"].get("deletionTimestamp")
    }


async def _listener_uid(stack: Stack) -> str:
    async def one() -> str | None:
        found = await stack.list("AutoscalingListener", stack.controller_namespace)
        return str(found[0]["metadata"]["uid"]) if len(found) == 1 else None

    uid: str = await eventually(one, what="one listener")
    return uid


async def test_direct_edit_replaces_idle_runners_and_lets_the_busy_one_finish(
    stack: Stack,
) -> None:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo"))
    listener = await _listener_uid(stack)
    await stack.scale("solo", 3, 1)

    async def registered() -> list[dict[str, Any]] | None:
        runners = await stack.list("EphemeralRunner")
        ok = len(runners) == 3 and all((r.get("status") or {}).get("runnerId") for r in runners)
        return runners if ok else None

    runners = await eventually(registered, what="3 registered runners")
    busy = runners[0]["metadata"]["name"]
    await stack.set_runner_status(busy, {"phase": "Running", "jobId": "job-1"})

    edited = runner_template(EDITED)
    await stack.kube.patch_merge(
        "EphemeralRunnerSet",
        "solo",
        {"spec": {"ephemeralRunnerSpec": {"spec": edited["spec"]}}},
        namespace=stack.namespace,
    )

    async def replaced() -> bool:
        live = await _live_runners(stack)
        assert live.get(busy) == OLD, live  # the busy runner keeps its job and its spec
        assert sorted(live.values()) == sorted([OLD, EDITED, EDITED]), live
        return True

    await eventually(replaced, what="idle runners replaced with the edited spec")
    await stack.wait_idle()
    ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
    assert _image(ers) == EDITED  # the ARS did not revert the edit
    assert await _listener_uid(stack) == listener  # nor drain the listener for it
    assert await stack.events("RunnerSpecEdited", "solo")
    pod = await stack.kube.get("Pod", busy, stack.namespace)  # its job is still running
    assert not pod["metadata"].get("deletionTimestamp")

    await stack.set_pod_status(  # the busy runner's job ends: exit 0
        busy,
        {
            "phase": "Succeeded",
            "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
        },
    )

    async def busy_gone() -> bool:
        live = await _live_runners(stack)
        assert busy not in live, live
        assert sorted(live.values()) == [EDITED, EDITED], live
        return True

    await eventually(busy_gone, what="the busy runner gone after its job")

    # The ARS's own template changes: it wins over the direct edit.
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", template=runner_template(FROM_ARS)))

    async def ars_template() -> bool:
        ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
        return _image(ers) == FROM_ARS

    await eventually(ars_template, what="the ARS template applied")
