"""A controller namespace that does not exist: the reconciler does not create it (the chart
does); the ARS says so (``ControllerNamespaceExists=False``, a Warning Event naming it), and
once it is created the listener follows and the condition turns ``True``.

On the real server only: the emulator makes a namespace up on first use."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import NAMESPACE, KubeClient, NotFoundError
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import Stack, ars_manifest, build_stack

pytestmark = pytest.mark.integration


@pytest.fixture
async def missing_namespace(kube_client: KubeClient, on_real_server: bool) -> AsyncIterator[str]:
    if not on_real_server:
        pytest.skip("the emulator creates a namespace on first use")
    name = f"arcflow-ctl-{secrets.token_hex(4)}"
    yield name
    with contextlib.suppress(NotFoundError):
        await kube_client.delete(NAMESPACE, name)


@pytest.fixture
async def stack_without_namespace(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    missing_namespace: str,
) -> AsyncIterator[Stack]:
    # The harness creates the controller namespace as the chart would: not here.
    async with build_stack(
        private_nats_server.url,
        kube_client,
        kube_namespace,
        controller_namespace=missing_namespace,
        ensure=False,
    ) as built:
        yield built


def _condition(ars: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (ars.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "ControllerNamespaceExists":
            return dict(condition)
    return None


async def test_a_missing_controller_namespace_is_reported_on_the_ars(
    stack_without_namespace: Stack, missing_namespace: str, kube_client: KubeClient
) -> None:
    stack = stack_without_namespace
    await stack.register("ns", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "ns"))

    async def reported() -> list[dict[str, Any]]:
        warnings = await stack.events("NamespaceNotFound", "ns")
        ars = await stack.kube.get("AutoscalingRunnerSet", "ns", stack.namespace)
        assert (ars.get("status") or {}).get("phase") == "Pending", ars.get("status")
        return warnings

    warnings = await eventually(reported, within=15, what="a NamespaceNotFound Warning Event")
    assert warnings[0]["type"] == "Warning"
    assert missing_namespace in warnings[0]["message"]
    # The upstream CRD's status has no conditions: a real server prunes the condition, so
    # the Event is the record (the emulator, which keeps it, is not this test's server).
    condition = _condition(await stack.kube.get("AutoscalingRunnerSet", "ns", stack.namespace))
    assert condition is None or condition["status"] == "False"
    with pytest.raises(NotFoundError):  # never made up by the reconciler
        await kube_client.get(NAMESPACE, missing_namespace)

    await kube_client.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": missing_namespace}}
    )

    async def listener_created() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "ns", stack.namespace)
        listeners = await stack.list("AutoscalingListener", missing_namespace)
        assert listeners, "no listener yet"
        assert await stack.events("NamespaceFound", "ns"), "no NamespaceFound Event"
        assert (_condition(ars) or {}).get("status") in (None, "True")
        return True

    await eventually(listener_created, within=30, what="the listener once the namespace exists")
    # One Event per change of the verdict, not one per pass (the passes every 10 s).
    assert len(await stack.events("NamespaceNotFound", "ns")) == 1
    assert len(await stack.events("NamespaceFound", "ns")) == 1
