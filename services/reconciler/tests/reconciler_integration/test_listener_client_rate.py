"""Issue 33: the listener's Kubernetes client rate is a reconciler setting (chart
``listener.kube.qps``/``burst``, upstream 0.15's 50/100 by default) that reaches every listener
pod the reconciler creates, on the real kube-apiserver, and the listener process reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import KubeClient
from arcflow.common.kube.lite import LiteKubeSettings
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import Stack, ars_manifest, build_stack, reconciler_test_settings

pytestmark = pytest.mark.integration


@pytest.fixture
async def tuned_stack(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> AsyncIterator[Stack]:
    settings = reconciler_test_settings(listener_kube_qps=75.5, listener_kube_burst=150)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, settings=settings
    ) as built:
        yield built


async def _listener_env(stack: Stack, ars: str) -> dict[str, str] | None:
    for al in await stack.list("AutoscalingListener", stack.controller_namespace):
        if al["spec"]["autoscalingRunnerSetName"] != ars:
            continue
        for pod in await stack.list("Pod", stack.controller_namespace):
            if pod["metadata"]["name"] == al["metadata"]["name"]:
                env = pod["spec"]["containers"][0].get("env") or []
                return {e["name"]: e.get("value", "") for e in env}
    return None


async def test_listener_pods_get_the_client_rate_of_the_reconciler(tuned_stack: Stack) -> None:
    stack = tuned_stack
    await stack.register("rated", "", 41)
    await stack.apply_ars(ars_manifest(stack.namespace, "rated"))

    async def env() -> dict[str, Any] | None:
        return await _listener_env(stack, "rated")

    found = await eventually(env, within=30, what="the listener pod of the set")
    assert (found["ARCFLOW_KUBE_QPS"], found["ARCFLOW_KUBE_BURST"]) == ("75.5", "150")
    read = LiteKubeSettings.from_env(found)  # what the listener process makes of it
    assert (read.qps, read.burst) == (75.5, 150)
