"""What the dev stack sees of the cluster while it runs: objects created since start (the
summary's ``objects_created``), every AutoscalingRunnerSet and the example's
EphemeralRunnerSets (the live view's tables), and on the node the pods the kubelet runs.

One list-then-watch per counted kind; best effort (a failed watch is opened again after half
a second, a 410 lists again): the counts inform, they never stop the stack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    KubeApiError,
    KubeClient,
    Resource,
)
from arcflow.devstack.node.stack import NodePods

COUNTED_KINDS: tuple[Resource, ...] = (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    EPHEMERAL_RUNNER,
    AUTOSCALING_LISTENER,
    POD,
    SECRET,
    SERVICE_ACCOUNT,
    ROLE,
    ROLE_BINDING,
)
_RETRY_SECONDS = 0.5


@dataclass
class ClusterObjects:
    """``await objects.follow()`` until cancelled; read the fields meanwhile."""

    kube: KubeClient
    #: ``--kube node``: the pods the kubelet runs, fed every pod event.
    node_pods: NodePods | None = None
    #: Called after each pod event on the node (the stack re-reads its services' pods).
    on_pod: Callable[[], None] = lambda: None
    #: kind -> objects of it created since the stack started.
    created: dict[str, int] = field(default_factory=dict)
    #: Every AutoscalingRunnerSet of the cluster, by (namespace, name).
    runner_sets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: Every EphemeralRunnerSet, by name.
    ers: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def follow(self) -> None:
        await asyncio.gather(*(self._follow(kind) for kind in COUNTED_KINDS))

    async def list_all(self) -> list[dict[str, Any]]:
        """Every object of the counted kinds, as the server lists them now."""
        listed = await asyncio.gather(*(self.kube.list(kind) for kind in COUNTED_KINDS))
        return [obj for result in listed for obj in result.items]

    async def _follow(self, kind: Resource) -> None:
        """List for a baseline (those were there before: not counted), then count ADDED."""
        seen: set[str] = set()
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    listed = await self.kube.list(kind)
                    seen.update(_uid(o) for o in listed.items)
                    for obj in listed.items:
                        self._observe(kind, "ADDED", obj)
                    resource_version = listed.resource_version or None
                stream = self.kube.watch(kind, resource_version=resource_version)
                async with stream:
                    async for event in stream:
                        resource_version = event.resource_version or resource_version
                        uid = _uid(event.object)
                        if event.type == "ADDED" and uid not in seen:
                            seen.add(uid)
                            self.created[kind.kind] = self.created.get(kind.kind, 0) + 1
                        self._observe(kind, event.type, event.object)
            except asyncio.CancelledError:
                raise
            except KubeApiError as exc:
                if exc.status == 410:
                    resource_version = None
                await asyncio.sleep(_RETRY_SECONDS)
            except Exception:  # the count is best effort; the stack keeps going
                await asyncio.sleep(_RETRY_SECONDS)

    def _observe(self, kind: Resource, event_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        if kind is AUTOSCALING_RUNNER_SET:
            _keep(self.runner_sets, (namespace, name), event_type, obj)
        elif kind is EPHEMERAL_RUNNER_SET:
            _keep(self.ers, name, event_type, obj)
        elif kind is POD and self.node_pods is not None:
            self.node_pods.observe(event_type, obj)
            self.on_pod()


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid"))


def _keep(into: dict[Any, dict[str, Any]], key: Any, event_type: str, obj: dict[str, Any]) -> None:
    if event_type == "DELETED":
        into.pop(key, None)
    else:
        into[key] = obj
