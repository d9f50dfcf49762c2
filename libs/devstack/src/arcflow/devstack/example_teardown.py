"""Removing the dev stack's example from a cluster the stack does not own (``--kubeconfig``),
while the services still run: the ARS is deleted, the reconciler finalizes it and its
children and the registrar deletes the scale sets; then the credentials Secret and, if the
stack created it, the namespace go. What is still there at the deadline is reported, never
guessed: with the time up the services are stopped first, so the report is what stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, NAMESPACE, SECRET, KubeClient, NotFoundError
from arcflow.devstack import demo

_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class ExampleTeardown:
    kube: KubeClient
    #: What the stack created (kind -> the object as the server returned it).
    applied: dict[str, dict[str, Any]]
    #: Every object of the kinds the stack counts, listed now.
    list_all: Callable[[], Awaitable[list[dict[str, Any]]]]
    #: The example's scale sets still registered (the simulator's; none for real GitHub).
    scale_sets_left: Callable[[], list[str]]
    #: Stops every service (used only when the deadline passed).
    stop_services: Callable[[], Awaitable[None]]
    timeout: float

    async def run(self) -> list[str]:
        """Delete the example and wait for it to go; returns what was left behind."""
        meta = self.applied[AUTOSCALING_RUNNER_SET.kind]["metadata"]
        name, namespace = str(meta["name"]), str(meta["namespace"])
        tree = demo.grow_demo_tree(
            await self.list_all(), {str(meta["uid"])}, ars_name=name, ars_namespace=namespace
        )
        with contextlib.suppress(NotFoundError):
            await self.kube.delete(
                AUTOSCALING_RUNNER_SET, name, namespace=namespace, uid=str(meta["uid"])
            )
        deadline = time.monotonic() + self.timeout
        while True:
            tree, leftovers = await self._left(tree, name, namespace)
            if not leftovers or time.monotonic() >= deadline:
                break
            await asyncio.sleep(_POLL_SECONDS)
        if leftovers:
            # Out of time: stop the services now (they are next anyway), so nothing changes
            # the cluster any more, and report what is really left, not a snapshot the
            # reconciler could still add to.
            await self.stop_services()
            tree, leftovers = await self._left(tree, name, namespace)
        await self._delete_own(namespace, leftovers)
        return leftovers

    async def _left(self, tree: set[str], name: str, namespace: str) -> tuple[set[str], list[str]]:
        objects = await self.list_all()
        tree = demo.grow_demo_tree(objects, tree, ars_name=name, ars_namespace=namespace)
        return tree, demo.demo_leftovers(objects, tree) + self.scale_sets_left()

    async def _delete_own(self, namespace: str, leftovers: list[str]) -> None:
        """The credentials Secret, and the namespace if the stack created it and it is empty
        of the example (else it is kept, and said)."""
        secret = self.applied.get(SECRET.kind)
        if secret is not None:
            with contextlib.suppress(NotFoundError):
                await self.kube.delete(
                    SECRET,
                    str(secret["metadata"]["name"]),
                    namespace=namespace,
                    uid=str(secret["metadata"]["uid"]),
                )
        if self.applied.get(NAMESPACE.kind) is None:
            return
        if any(f" {namespace}/" in ref for ref in leftovers):
            leftovers.append(f"Namespace {namespace} (kept: it still holds the above)")
        else:
            with contextlib.suppress(NotFoundError):
                await self.kube.delete(NAMESPACE, namespace)
