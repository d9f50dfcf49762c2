"""EphemeralRunner creates that the API server refuses with 500 are retried until the set has
its replicas, without a new scale request from the listener.

A scale request (a patchID) is served once, so that finished runners are not topped up while
the listener's count still includes them. Runners claimed for that request whose create
failed must still be created on a later pass; otherwise their jobs wait for runners that never
come (found by the chaos suite's Kubernetes-fault burst)."""

from __future__ import annotations

import pytest

from arcflow.devstack.kube_emulator import KubeEmulator
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration


async def test_runners_whose_create_failed_are_created_for_the_same_request(
    stack: Stack, kube_emulator: KubeEmulator
) -> None:
    await stack.register("flaky", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "flaky"))

    async def has_ers() -> str | None:
        found = await stack.list("EphemeralRunnerSet")
        return str(found[0]["metadata"]["name"]) if found else None

    ers = await eventually(has_ers)
    refusals = kube_emulator.inject_error(
        verb="create",
        resource="ephemeralrunners",
        namespace=stack.namespace,
        status=500,
        reason="InternalError",
        message="etcdserver: request timed out",
        times=3,
    )
    await stack.scale(ers, 5, 1)

    async def five_runners() -> bool:
        return len(await stack.list("EphemeralRunner")) == 5

    await eventually(five_runners, within=30)
    assert refusals.hits == 3
    spec = (await stack.kube.get("EphemeralRunnerSet", ers, stack.namespace))["spec"]
    assert (spec.get("replicas"), spec.get("patchID")) == (5, 1)  # no new request needed
