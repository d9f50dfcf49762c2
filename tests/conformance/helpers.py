"""Manifests and polling helpers for the conformance suite (KubeClient only, so the suite
runs unchanged against a real cluster)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    KubeClient,
    NotFoundError,
    Resource,
    WatchEvent,
    WatchStream,
)

Manifest = dict[str, Any]
#: How long a test waits for asynchronous work of a real cluster (garbage collection,
#: namespace deletion); a loaded machine needs seconds.
DEADLINE = 30.0

#: Pins a test to the emulator (it needs a fault or a control only the emulator has; the test
#: says which in its docstring).
emulator_only = pytest.mark.parametrize("backend", ["emulator"], indirect=True)
#: Pins a test to the real server (it tests the server itself, e.g. the CRD schema).
apiserver_only = pytest.mark.parametrize("backend", ["apiserver"], indirect=True)


def ars(
    namespace: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    min_runners: int = 1,
    finalizers: list[str] | None = None,
) -> Manifest:
    """An AutoscalingRunnerSet using only fields the real CRD schema keeps (no pruning)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": AUTOSCALING_RUNNER_SET.api_version,
        "kind": AUTOSCALING_RUNNER_SET.kind,
        "metadata": metadata,
        "spec": {
            "githubConfigUrl": "https://github.com/arcflow-test",
            "githubConfigSecret": "github-secret",
            "minRunners": min_runners,
            "maxRunners": 5,
        },
    }


def owner_ref(owner: Manifest) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def config_map(
    namespace: str,
    name: str,
    *,
    owner: Manifest | None = None,
    finalizers: list[str] | None = None,
    labels: dict[str, str] | None = None,
) -> Manifest:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
    if finalizers:
        metadata["finalizers"] = finalizers
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}}


async def wait_gone(
    client: KubeClient, resource: Resource | str, name: str, namespace: str
) -> None:
    """Poll until the object is gone (garbage collection is asynchronous on a real cluster)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            await client.get(resource, name, namespace)
        except NotFoundError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"{resource} {namespace}/{name} still exists after {DEADLINE}s "
        "(waited for the garbage collector / the last finalizer's removal)"
    )


async def collect(stream: WatchStream, count: int, within: float = DEADLINE) -> list[WatchEvent]:
    """The first ``count`` events of a stream (fails on timeout); closes the stream."""
    events: list[WatchEvent] = []
    async with stream:
        async with asyncio.timeout(within):
            async for event in stream:
                if event.type == "BOOKMARK":
                    continue
                events.append(event)
                if len(events) >= count:
                    break
    return events


def names(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]
