"""Watch: initial ADDED, resume from a resourceVersion, selectors, timeoutSeconds."""

from __future__ import annotations

import asyncio
import time

import pytest

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, CONFIG_MAP, KubeClient
from tests.conformance.helpers import ars, collect, config_map, names

pytestmark = pytest.mark.integration

MINE = {"arcflow.test/owner": "this-test"}


async def test_watch_without_version_starts_with_added(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "w1"))
    await kube_client.create(ars(kube_namespace, "w2"))
    events = await collect(kube_client.watch(AUTOSCALING_RUNNER_SET, namespace=kube_namespace), 2)
    assert sorted(names(events)) == [("ADDED", "w1"), ("ADDED", "w2")]


async def test_watch_from_list_version_sees_live_changes(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "live"))
    listed = await kube_client.list(AUTOSCALING_RUNNER_SET, namespace=kube_namespace)
    stream = kube_client.watch(
        AUTOSCALING_RUNNER_SET, namespace=kube_namespace, resource_version=listed.resource_version
    )

    async def mutate() -> None:
        await asyncio.sleep(0.1)
        await kube_client.patch_merge(
            AUTOSCALING_RUNNER_SET, "live", {"spec": {"minRunners": 2}}, namespace=kube_namespace
        )
        await kube_client.create(ars(kube_namespace, "live2"))
        await kube_client.delete(AUTOSCALING_RUNNER_SET, "live", namespace=kube_namespace)

    task = asyncio.create_task(mutate())
    events = await collect(stream, 3)
    await task
    assert names(events) == [("MODIFIED", "live"), ("ADDED", "live2"), ("DELETED", "live")]
    assert events[0].object["spec"]["minRunners"] == 2
    assert stream.resource_version == events[-1].resource_version


async def test_watch_resumes_from_resource_version(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    # Labelled, and watched by that label: a real namespace gets objects of its own
    # (kube-root-ca.crt) at a time of kube-controller-manager's choosing.
    first = await kube_client.create(config_map(kube_namespace, "r1", labels=MINE))
    resume_from = first["metadata"]["resourceVersion"]
    # Changes while nobody watches:
    await kube_client.create(config_map(kube_namespace, "r2", labels=MINE))
    await kube_client.patch_merge(CONFIG_MAP, "r1", {"data": {"k": "w"}}, namespace=kube_namespace)
    await kube_client.delete(CONFIG_MAP, "r2", namespace=kube_namespace)
    events = await collect(
        kube_client.watch(
            CONFIG_MAP, namespace=kube_namespace, label_selector=MINE, resource_version=resume_from
        ),
        3,
    )
    assert names(events) == [("ADDED", "r2"), ("MODIFIED", "r1"), ("DELETED", "r2")]
    versions = [int(e.resource_version or 0) for e in events]
    assert versions == sorted(versions)
    assert versions[0] > int(resume_from)


async def test_watch_honours_label_selector(kube_client: KubeClient, kube_namespace: str) -> None:
    start = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    await kube_client.create(config_map(kube_namespace, "other", labels={"app": "other"}))
    await kube_client.create(config_map(kube_namespace, "mine", labels={"app": "mine"}))
    # A label change out of the selection shows up as DELETED for this watch.
    await kube_client.patch_merge(
        CONFIG_MAP, "mine", {"metadata": {"labels": {"app": "gone"}}}, namespace=kube_namespace
    )
    events = await collect(
        kube_client.watch(
            CONFIG_MAP,
            namespace=kube_namespace,
            label_selector="app=mine",
            resource_version=start.resource_version,
        ),
        2,
    )
    assert names(events) == [("ADDED", "mine"), ("DELETED", "mine")]


async def test_timeout_seconds_ends_the_stream(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    listed = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    started = time.monotonic()
    seen = []
    async with asyncio.timeout(15):
        async for event in kube_client.watch(
            CONFIG_MAP,
            namespace=kube_namespace,
            label_selector=MINE,
            resource_version=listed.resource_version,
            timeout_seconds=1,
        ):
            seen.append(event)
    elapsed = time.monotonic() - started
    assert [e for e in seen if e.type != "BOOKMARK"] == []
    assert 0.9 <= elapsed < 10
