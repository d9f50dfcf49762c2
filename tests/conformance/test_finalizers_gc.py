"""Finalizers, deletionTimestamp and ownerReference cascading deletion."""

from __future__ import annotations

import asyncio
import time

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    EPHEMERAL_RUNNER_SET,
    ConflictError,
    InvalidError,
    KubeClient,
    NotFoundError,
)
from tests.conformance.helpers import ars, config_map, owner_ref, wait_gone

pytestmark = pytest.mark.integration

FINALIZER = "autoscalingrunnerset.actions.github.com/finalizer"


async def test_delete_with_finalizer_sets_deletion_timestamp(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "fin", finalizers=[FINALIZER]))
    await kube_client.delete(AUTOSCALING_RUNNER_SET, "fin", namespace=kube_namespace)
    still = await kube_client.get(AUTOSCALING_RUNNER_SET, "fin", kube_namespace)
    assert still["metadata"]["deletionTimestamp"]
    assert still["metadata"]["finalizers"] == [FINALIZER]
    await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET, "fin", {"metadata": {"finalizers": None}}, namespace=kube_namespace
    )
    with pytest.raises(NotFoundError):
        await kube_client.get(AUTOSCALING_RUNNER_SET, "fin", kube_namespace)


async def test_removing_one_of_two_finalizers_keeps_the_object(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "fin2", finalizers=[FINALIZER, "example.com/b"]))
    await kube_client.delete(AUTOSCALING_RUNNER_SET, "fin2", namespace=kube_namespace)
    left = await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET,
        "fin2",
        {"metadata": {"finalizers": ["example.com/b"]}},
        namespace=kube_namespace,
    )
    assert left["metadata"]["finalizers"] == ["example.com/b"]
    assert left["metadata"]["deletionTimestamp"]
    await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET, "fin2", {"metadata": {"finalizers": []}}, namespace=kube_namespace
    )
    await wait_gone(kube_client, AUTOSCALING_RUNNER_SET, "fin2", kube_namespace)


async def test_no_new_finalizers_while_deleting(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "fin3", finalizers=[FINALIZER]))
    await kube_client.delete(AUTOSCALING_RUNNER_SET, "fin3", namespace=kube_namespace)
    with pytest.raises(InvalidError):
        await kube_client.patch_merge(
            AUTOSCALING_RUNNER_SET,
            "fin3",
            {"metadata": {"finalizers": [FINALIZER, "example.com/late"]}},
            namespace=kube_namespace,
        )
    await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET, "fin3", {"metadata": {"finalizers": None}}, namespace=kube_namespace
    )


async def test_delete_preconditions(kube_client: KubeClient, kube_namespace: str) -> None:
    created = await kube_client.create(config_map(kube_namespace, "pre"))
    with pytest.raises(ConflictError):
        await kube_client.delete(
            CONFIG_MAP, "pre", namespace=kube_namespace, uid="00000000-0000-0000-0000-000000000000"
        )
    await kube_client.delete(
        CONFIG_MAP, "pre", namespace=kube_namespace, uid=created["metadata"]["uid"]
    )
    await wait_gone(kube_client, CONFIG_MAP, "pre", kube_namespace)


async def test_cascading_deletion_is_recursive(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(ars(kube_namespace, "top"))
    ers = await kube_client.create(
        {
            "apiVersion": EPHEMERAL_RUNNER_SET.api_version,
            "kind": EPHEMERAL_RUNNER_SET.kind,
            "metadata": {
                "name": "top",
                "namespace": kube_namespace,
                "ownerReferences": [owner_ref(owner)],
            },
            # The fields the CRD requires (a real server refuses the object without them).
            "spec": {
                "replicas": 1,
                "patchID": 0,
                "ephemeralRunnerSpec": {
                    "githubConfigUrl": "https://github.com/arcflow-test",
                    "githubConfigSecret": "github-secret",
                    "runnerScaleSetId": 1,
                },
            },
        }
    )
    await kube_client.create(config_map(kube_namespace, "leaf", owner=ers))
    await kube_client.create(config_map(kube_namespace, "direct", owner=owner))
    await kube_client.create(config_map(kube_namespace, "bystander"))
    await kube_client.delete(AUTOSCALING_RUNNER_SET, "top", namespace=kube_namespace)
    await wait_gone(kube_client, EPHEMERAL_RUNNER_SET, "top", kube_namespace)
    await wait_gone(kube_client, CONFIG_MAP, "leaf", kube_namespace)
    await wait_gone(kube_client, CONFIG_MAP, "direct", kube_namespace)
    assert await kube_client.get(CONFIG_MAP, "bystander", kube_namespace)


async def test_cascade_respects_dependent_finalizers(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(ars(kube_namespace, "holder"))
    await kube_client.create(
        config_map(kube_namespace, "held", owner=owner, finalizers=["example.com/hold"])
    )
    await kube_client.delete(AUTOSCALING_RUNNER_SET, "holder", namespace=kube_namespace)
    await wait_gone(kube_client, AUTOSCALING_RUNNER_SET, "holder", kube_namespace)
    # The collector deletes the dependent, but its finalizer keeps it until removed.
    deadline = time.monotonic() + 15
    while True:
        held = await kube_client.get(CONFIG_MAP, "held", kube_namespace)
        if held["metadata"].get("deletionTimestamp") or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert held["metadata"]["deletionTimestamp"]
    await kube_client.patch_merge(
        CONFIG_MAP, "held", {"metadata": {"finalizers": None}}, namespace=kube_namespace
    )
    await wait_gone(kube_client, CONFIG_MAP, "held", kube_namespace)


async def test_orphan_propagation_keeps_dependents(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(ars(kube_namespace, "parent"))
    await kube_client.create(config_map(kube_namespace, "orphan", owner=owner))
    await kube_client.delete(
        AUTOSCALING_RUNNER_SET, "parent", namespace=kube_namespace, propagation_policy="Orphan"
    )
    await wait_gone(kube_client, AUTOSCALING_RUNNER_SET, "parent", kube_namespace)
    deadline = time.monotonic() + 15
    while True:
        orphan = await kube_client.get(CONFIG_MAP, "orphan", kube_namespace)
        if not orphan["metadata"].get("ownerReferences") or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert not orphan["metadata"].get("ownerReferences")


async def test_foreground_deletion_removes_dependents_first(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(ars(kube_namespace, "fg"))
    await kube_client.create(config_map(kube_namespace, "fg-child", owner=owner))
    await kube_client.delete(
        AUTOSCALING_RUNNER_SET, "fg", namespace=kube_namespace, propagation_policy="Foreground"
    )
    await wait_gone(kube_client, CONFIG_MAP, "fg-child", kube_namespace)
    await wait_gone(kube_client, AUTOSCALING_RUNNER_SET, "fg", kube_namespace)
