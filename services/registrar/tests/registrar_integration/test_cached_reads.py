"""A converge reads the ARS from the watch-fed cache when it holds the event's version
(ADR 0031): no GET per ARS status change; a cache behind the event still reads over HTTP.

On the real kube-apiserver: every request of the stack goes through the fault proxy, which
records the registrar's reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, KubeClient, KubeSettings
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.registrar.state import RegistrarState
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.polling import eventually

from .harness import Stack, change_event, state_of
from .test_lifecycle import _announced, apply_ars, registered

pytestmark = pytest.mark.integration


@pytest.fixture
async def kube_proxy(request: pytest.FixtureRequest) -> AsyncIterator[KubeFaultProxy]:
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("the fault proxy stands in front of the session's real kube-apiserver")
    plane: ControlPlane = request.getfixturevalue("control_plane")
    async with KubeFaultProxy.for_control_plane(plane) as proxy:
        yield proxy


@pytest.fixture
async def kube_client(kube_proxy: KubeFaultProxy, tmp_path: Path) -> AsyncIterator[KubeClient]:
    """This module's admin client (the stack's) talks through the proxy."""
    path = kube_proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")
    settings = KubeSettings(kubeconfig=str(path), qps=1000, burst=1000, request_timeout=10)
    async with await KubeClient.from_settings(settings) as client:
        yield client


def ars_gets(proxy: KubeFaultProxy, name: str) -> int:
    return sum(
        1
        for r in proxy.requests
        if r.method == "GET" and r.path.endswith(f"/autoscalingrunnersets/{name}")
    )


async def cached_at(state: RegistrarState, namespace: str, version: str) -> bool:
    doc = state.lookup.ars.get(AUTOSCALING_RUNNER_SET, "arc", namespace)
    return doc is not None and doc["metadata"]["resourceVersion"] == version


async def handled_more(state: RegistrarState, before: int) -> bool:
    return state.handled > before


async def test_status_change_converges_from_the_cache(
    stack: Stack, kube_proxy: KubeFaultProxy
) -> None:
    await stack.create_secret({"github_token": stack.pat})
    app = await stack.start_registrar(run_sweep=False)
    state = state_of(app)
    await apply_ars(stack, stack.ars_manifest("arc", [{"name": "a"}], runnerScaleSetName="c"))
    await eventually(lambda: registered(stack, {"c-a"}))
    await eventually(lambda: _announced(stack, "arc", 1))

    # The ARS's status changes (what the reconciler writes as runners come and go): the
    # registrar converges on each event without reading the ARS over HTTP.
    gets = ars_gets(kube_proxy, "arc")
    for count in (1, 2, 3):
        patched = await stack.kube.patch_status(
            AUTOSCALING_RUNNER_SET, "arc", {"currentRunners": count}, namespace=stack.namespace
        )
        version = patched["metadata"]["resourceVersion"]
        await eventually(lambda v=version: cached_at(state, stack.namespace, v))
        handled = state.handled
        await stack.publish_change(patched)
        await eventually(lambda h=handled: handled_more(state, h))
    assert ars_gets(kube_proxy, "arc") == gets
    assert set(stack.scale_sets()) == {"c-a"}
    assert stack.create_requests() == 1

    # An event newer than anything the cache holds (its watch lags): one GET, same outcome.
    lagging = change_event(patched, "MODIFIED").model_copy(
        update={"resource_version": str(int(patched["metadata"]["resourceVersion"]) + 10**6)}
    )
    handled = state.handled
    await stack.publish_raw(lagging, dedup=False)
    await eventually(lambda: handled_more(state, handled))
    assert ars_gets(kube_proxy, "arc") == gets + 1
    assert set(stack.scale_sets()) == {"c-a"}
    assert stack.create_requests() == 1
