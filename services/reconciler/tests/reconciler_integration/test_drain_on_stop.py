"""Issue 33: a reconciler told to stop (SIGTERM: the service runtime's stop) takes no new work
and lets the pass in flight finish within ``drain_seconds``, on the real kube-apiserver and a
real nats-server. The pass here waits on the registrar's JIT answer, held back by the test:
after the stop began it still writes the runner's JIT Secret. Without a drain it is cancelled
and writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import Stack, ars_manifest, build_stack, reconciler_test_settings

pytestmark = pytest.mark.integration


@pytest.fixture(params=[10.0, 0.0], ids=["drain", "no-drain"])
async def gated_stack(
    request: pytest.FixtureRequest,
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
) -> AsyncIterator[tuple[Stack, float]]:
    settings = reconciler_test_settings(drain_seconds=request.param, rpc_timeout_seconds=10)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as built:
        yield built, request.param


async def _secret(stack: Stack, name: str) -> dict[str, Any] | None:
    try:
        return await stack.kube.get("Secret", name, stack.namespace)
    except NotFoundError:
        return None


async def test_a_pass_in_flight_finishes_within_the_drain(
    gated_stack: tuple[Stack, float],
) -> None:
    stack, drain = gated_stack
    gate = asyncio.Event()
    stack.rpc.jit_gate = gate
    await stack.register("drained", "", 51)
    await stack.apply_ars(ars_manifest(stack.namespace, "drained"))
    await eventually(lambda: stack.list("EphemeralRunnerSet"), what="the runner set")
    await stack.scale("drained", 1, 1)

    async def held() -> bool:
        return stack.rpc.jit_held == 1

    await eventually(held, within=20, what="the runner's JIT request held by the registrar")
    runner = (await stack.list("EphemeralRunner"))[0]["metadata"]["name"]
    runtime = stack.runtimes[0]
    loop = asyncio.get_running_loop()
    began = loop.time()
    stopping = asyncio.create_task(runtime.stop())

    async def stop_began() -> bool:
        return not runtime.started

    await eventually(stop_began, what="the reconciler stopping")
    gate.set()  # the registrar answers now, after SIGTERM
    await asyncio.wait_for(stopping, 20)
    took = loop.time() - began
    if drain:
        assert await _secret(stack, runner) is not None, "the pass in flight was not drained"
        assert took < drain
    else:
        assert await _secret(stack, runner) is None
