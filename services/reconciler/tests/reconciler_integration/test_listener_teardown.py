"""Deleting an AutoscalingRunnerSet stops its listener before taking away what it runs with.

The listener process keeps patching its EphemeralRunnerSet until it stops; a Role and
RoleBinding deleted in the same pass as its pod made every one of those patches a 403. On the
real server (no kubelet here) a pod without a node goes at once, so a test finalizer holds it
as a kubelet's graceful termination would: while it is held its RBAC must stay, and the DELETED
events come pod first, then the RoleBinding, the Role and the ServiceAccount."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.kube import KubeClient, NotFoundError
from tests.polling import eventually

from .harness import Stack, ars_manifest, metric_total

pytestmark = pytest.mark.integration

TERMINATING = "arcflow.test/terminating"


def _listener_passes(reader: InMemoryMetricReader) -> int:
    return metric_total(reader, "arcflow_reconciler_reconciles", kind="al")


async def _record_deletions(
    kube: KubeClient, kind: str, namespace: str, name: str, version: str, seen: dict[str, float]
) -> None:
    async with kube.watch(kind, namespace=namespace, resource_version=version) as stream:
        async for event in stream:
            if event.type == "DELETED" and event.object["metadata"]["name"] == name:
                seen[kind] = time.monotonic()


async def _exists(kube: KubeClient, kind: str, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace)
    except NotFoundError:
        return False
    return True


async def test_the_listener_pod_is_gone_before_its_rbac(
    counted_stack: Stack, reader: InMemoryMetricReader
) -> None:
    stack = counted_stack
    await stack.register("td", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "td"))

    async def listener() -> dict[str, Any] | None:
        mine = [
            al
            for al in await stack.list("AutoscalingListener", stack.controller_namespace)
            if al["spec"]["autoscalingRunnerSetNamespace"] == stack.namespace
        ]
        if not mine:
            return None
        name = mine[0]["metadata"]["name"]
        pods = {p["metadata"]["name"] for p in await stack.list("Pod", stack.controller_namespace)}
        bindings = {r["metadata"]["name"] for r in await stack.list("RoleBinding")}
        return mine[0] if name in pods and name in bindings else None

    al = await eventually(listener, what="the listener's pod and RoleBinding")
    name = al["metadata"]["name"]
    # The "kubelet" holds the pod while it terminates.
    await stack.kube.patch_merge(
        "Pod",
        name,
        {"metadata": {"finalizers": [TERMINATING]}},
        namespace=stack.controller_namespace,
    )
    rbac = (
        ("ServiceAccount", stack.controller_namespace),
        ("Role", stack.namespace),
        ("RoleBinding", stack.namespace),
    )
    seen: dict[str, float] = {}
    watches = []
    for kind, namespace in (("Pod", stack.controller_namespace), *rbac):
        version = (await stack.kube.list(kind, namespace=namespace)).resource_version
        watches.append(
            asyncio.ensure_future(
                _record_deletions(stack.kube, kind, namespace, name, version, seen)
            )
        )
    try:
        await stack.kube.delete("AutoscalingRunnerSet", "td", namespace=stack.namespace)

        async def pod_terminating() -> bool:
            pod = await stack.kube.get("Pod", name, stack.controller_namespace)
            return bool(pod["metadata"].get("deletionTimestamp"))

        await eventually(pod_terminating, within=15, what="the listener pod deleted")
        passes = _listener_passes(reader)
        await eventually(
            lambda: _true(_listener_passes(reader) >= passes + 2),
            within=10,
            what="two listener passes while its pod terminates",
        )
        for kind, namespace in rbac:
            assert await _exists(stack.kube, kind, name, namespace), (
                f"{kind} deleted while the listener pod still terminates"
            )
        await stack.kube.patch_merge(
            "Pod", name, {"metadata": {"finalizers": None}}, namespace=stack.controller_namespace
        )

        async def all_deleted() -> bool:
            assert len(seen) == 4, f"DELETED seen for {sorted(seen)}"
            return True

        await eventually(all_deleted, within=20, what="the listener's pod and RBAC deleted")
    finally:
        for watch in watches:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
        with contextlib.suppress(NotFoundError):
            await stack.kube.patch_merge(
                "Pod",
                name,
                {"metadata": {"finalizers": None}},
                namespace=stack.controller_namespace,
            )
    for kind, _ in rbac:
        assert seen[kind] > seen["Pod"], f"{kind} deleted before the listener pod"


async def _true(value: bool) -> bool:
    return value
