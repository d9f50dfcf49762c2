"""Issue 33: per-kind caps within the reconciler's shared workers, on the real kube-apiserver.
Two workers, at most one runner pass at a time; the registrar holds the runners' JIT answers
(a slow GitHub), so runner passes hang. A second set applied meanwhile still gets its runner
set and listener at once from the free worker. Without the cap, both workers would wait on
JIT answers (up to the RPC timeout, 30 s here) and the second set with them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import Stack, ars_manifest, build_stack, reconciler_test_settings

pytestmark = pytest.mark.integration


@pytest.fixture
async def capped_stack(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> AsyncIterator[Stack]:
    settings = reconciler_test_settings(workers=2, worker_caps={"er": 1}, rpc_timeout_seconds=30)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as built:
        yield built


async def test_runner_passes_at_their_cap_leave_a_worker_for_other_sets(
    capped_stack: Stack,
) -> None:
    stack = capped_stack
    gate = asyncio.Event()
    stack.rpc.jit_gate = gate
    try:
        await stack.register("busy", "", 61)
        await stack.apply_ars(ars_manifest(stack.namespace, "busy"))
        await eventually(lambda: stack.list("EphemeralRunnerSet"), what="the first runner set")
        await stack.scale("busy", 3, 1)

        async def held() -> bool:
            runners = await stack.list("EphemeralRunner")
            return stack.rpc.jit_held == 1 and len(runners) == 3

        await eventually(held, within=20, what="three runners, one JIT request held")
        await stack.register("other", "", 62)
        await stack.apply_ars(ars_manifest(stack.namespace, "other"))

        async def second_set() -> bool:
            sets = await stack.list("EphemeralRunnerSet")
            return any(s["metadata"]["name"].startswith("other") for s in sets)

        await eventually(second_set, within=10, what="the second set's runner set, at once")
        assert stack.rpc.jit_held == 1  # the runner passes still wait
    finally:
        gate.set()
