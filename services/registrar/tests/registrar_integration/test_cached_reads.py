"""A converge reads the ARS from the watch-fed cache when it holds the event's version
(ADR 0031): no GET per ARS status change; a cache behind the event still reads over HTTP."""

from __future__ import annotations

import pytest

from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.registrar.state import RegistrarState
from tests.polling import eventually

from .harness import Stack, change_event, state_of
from .test_lifecycle import _announced, apply_ars, registered

pytestmark = pytest.mark.integration


def ars_gets(emulator: KubeEmulator, name: str) -> int:
    return sum(
        1
        for r in emulator.requests
        if r.method == "GET" and r.path.endswith(f"/autoscalingrunnersets/{name}")
    )


async def cached_at(state: RegistrarState, namespace: str, version: str) -> bool:
    doc = state.lookup.ars.get(AUTOSCALING_RUNNER_SET, "arc", namespace)
    return doc is not None and doc["metadata"]["resourceVersion"] == version


async def handled_more(state: RegistrarState, before: int) -> bool:
    return state.handled > before


async def test_status_change_converges_from_the_cache(
    stack: Stack, kube_emulator: KubeEmulator
) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar(run_sweep=False)
    state = state_of(app)
    await apply_ars(stack, stack.ars_manifest("arc", [{"name": "a"}], runnerScaleSetName="c"))
    await eventually(lambda: registered(stack, {"c-a"}))
    await eventually(lambda: _announced(stack, "arc", 1))

    # The ARS's status changes (what the reconciler writes as runners come and go): the
    # registrar converges on each event without reading the ARS over HTTP.
    gets = ars_gets(kube_emulator, "arc")
    for count in (1, 2, 3):
        patched = await stack.kube.patch_status(
            AUTOSCALING_RUNNER_SET, "arc", {"currentRunners": count}, namespace=stack.namespace
        )
        version = patched["metadata"]["resourceVersion"]
        await eventually(lambda v=version: cached_at(state, stack.namespace, v))
        handled = state.handled
        await stack.publish_change(patched)
        await eventually(lambda h=handled: handled_more(state, h))
    assert ars_gets(kube_emulator, "arc") == gets
    assert set(stack.scale_sets()) == {"c-a"}
    assert stack.create_requests() == 1

    # An event newer than anything the cache holds (its watch lags): one GET, same outcome.
    lagging = change_event(patched, "MODIFIED").model_copy(
        update={"resource_version": str(int(patched["metadata"]["resourceVersion"]) + 10**6)}
    )
    handled = state.handled
    await stack.publish_raw(lagging, dedup=False)
    await eventually(lambda: handled_more(state, handled))
    assert ars_gets(kube_emulator, "arc") == gets + 1
    assert set(stack.scale_sets()) == {"c-a"}
    assert stack.create_requests() == 1
