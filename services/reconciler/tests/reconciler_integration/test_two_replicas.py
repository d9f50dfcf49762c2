"""Two reconciler replicas on the same objects: optimistic concurrency (409 -> re-read) keeps
exactly one of every child and loses no write.

Both replicas share the durable consumers (each event goes to one of them) and both re-list
everything every 0.2 s, so every key is reconciled by both, concurrently, over and over.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import (
    Stack,
    ars_manifest,
    build_stack,
    reconciler_test_settings,
    runner_template,
)

pytestmark = pytest.mark.integration

VARIANTS = [
    {"name": "cpu", "template": runner_template("runner:cpu")},
    {"name": "gpu", "template": runner_template("runner:gpu")},
]


async def _children(stack: Stack) -> dict[str, list[dict[str, Any]]]:
    return {
        "al": await stack.list("AutoscalingListener", stack.controller_namespace),
        "ers": await stack.list("EphemeralRunnerSet"),
        "er": await stack.list("EphemeralRunner"),
        "pods": await stack.list("Pod", stack.controller_namespace),
        "roles": await stack.list("Role"),
    }


async def test_two_replicas_make_no_duplicates_and_lose_no_write(
    private_nats_server: NatsServer, kube_client: KubeClient, kube_namespace: str
) -> None:
    settings = reconciler_test_settings(resync_interval_seconds=0.2)
    async with build_stack(
        private_nats_server.url, kube_client, kube_namespace, replicas=2, settings=settings
    ) as stack:
        most = {"al": 0, "ers": 0, "er": 0, "pods": 0, "roles": 0}
        stop = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                for kind, objs in (await _children(stack)).items():
                    most[kind] = max(most[kind], len(objs))
                await asyncio.sleep(0.02)

        watcher = asyncio.create_task(watch())
        await stack.register("big", "cpu", 11)
        await stack.register("big", "gpu", 12)
        await stack.apply_ars(ars_manifest(stack.namespace, "big", runnerVariants=VARIANTS))

        async def converged() -> bool:
            ars = await stack.kube.get("AutoscalingRunnerSet", "big", stack.namespace)
            children = await _children(stack)
            return (ars.get("status") or {}).get("phase") == "Running" and len(
                children["pods"]
            ) == 1

        await eventually(converged)
        await stack.scale("big-cpu", 5, 0)

        async def five_ready() -> bool:
            runners = await stack.list("EphemeralRunner")
            pods = [p for p in await stack.list("Pod") if p["metadata"]["name"] != "x"]
            return (
                len(runners) == 5
                and all((r.get("status") or {}).get("runnerId") for r in runners)
                and len(pods) == 5
            )

        await eventually(five_ready)
        # Both replicas look at everything again, three rounds, each handled before the next: a
        # duplicate or a lost write would show in ``most`` (a fixed wait could end before any
        # round ran on a loaded machine).
        names = {kind: [o["metadata"]["name"] for o in await stack.list(kind)]
                 for kind in ("EphemeralRunnerSet", "EphemeralRunner")}  # fmt: skip
        for _ in range(3):
            for app in stack.apps:
                await app.resync()
            for kind, found in names.items():
                for name in found:
                    await stack.handled(kind, name, lambda cached: cached is not None)
        stop.set()
        await watcher

        assert most == {"al": 1, "ers": 2, "er": 5, "pods": 1, "roles": 1}
        runners = await stack.list("EphemeralRunner")
        assert len(runners) == 5
        secrets = {s["metadata"]["name"]: s for s in await stack.list("Secret")}
        for er in runners:  # each runner kept the registration its Secret holds
            name = er["metadata"]["name"]
            secret_id = int(base64.b64decode(secrets[name]["data"]["runnerId"]))
            assert er["status"]["runnerId"] == secret_id
        assert len(stack.rpc.jit_requests) == 5  # one JIT config per runner, not per replica
        assert stack.rpc.removed == []  # nothing deregistered by a racing replica

        async def counted() -> bool:  # counts-only status writes are paced: it converges later
            ers = await stack.kube.get("EphemeralRunnerSet", "big-cpu", stack.namespace)
            return bool(ers["status"]["currentReplicas"] == 5)

        await eventually(counted, what="big-cpu's status counting its 5 runners")
        both = [app.queue.processed for app in stack.apps]
        assert all(n > 0 for n in both)  # both replicas really did work
