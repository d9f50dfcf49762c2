"""Emulator-only behaviours: forced 410, restart, dropped watches, recorded Content-Type.

Each test uses the ``kube_emulator`` fixture, so it skips against a real cluster; the client
side still goes through ``KubeClient`` only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    EPHEMERAL_RUNNER_SET,
    KubeClient,
    KubeSettings,
    ResourceVersionExpired,
)
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.conformance.helpers import ars, collect, config_map, emulator_only, names

pytestmark = pytest.mark.integration


@emulator_only
async def test_expired_resource_version_raises_typed_410(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    old = await kube_client.create(config_map(kube_namespace, "old"))
    await kube_client.create(config_map(kube_namespace, "newer"))
    kube_emulator.expire_history()
    stream = kube_client.watch(
        CONFIG_MAP, namespace=kube_namespace, resource_version=old["metadata"]["resourceVersion"]
    )
    with pytest.raises(ResourceVersionExpired) as caught:
        await collect(stream, 1)
    assert caught.value.status == 410
    # The recovery the watcher performs: re-list, then watch from the list's version.
    listed = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    assert {i["metadata"]["name"] for i in listed.items} >= {"old", "newer"}
    live = kube_client.watch(
        CONFIG_MAP, namespace=kube_namespace, resource_version=listed.resource_version
    )
    task = asyncio.create_task(collect(live, 1))
    await asyncio.sleep(0.05)
    await kube_client.create(config_map(kube_namespace, "after"))
    assert names(await task) == [("ADDED", "after")]


async def test_bounded_history_expires_old_versions(
    kube_emulator: KubeEmulator, tmp_path: Path
) -> None:
    async with KubeEmulator(history_limit=3) as emulator:
        path = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        async with await KubeClient.from_settings(KubeSettings(kubeconfig=str(path))) as client:
            first = await client.create(config_map("bounded", "c0"))
            for index in range(1, 6):
                await client.create(config_map("bounded", f"c{index}"))
            with pytest.raises(ResourceVersionExpired):
                await collect(
                    client.watch(
                        CONFIG_MAP,
                        namespace="bounded",
                        resource_version=first["metadata"]["resourceVersion"],
                    ),
                    1,
                )
            recent = await client.list(CONFIG_MAP, namespace="bounded")
            latest = int(recent.resource_version)
            events = await collect(
                client.watch(CONFIG_MAP, namespace="bounded", resource_version=str(latest - 2)),
                2,
            )
            assert names(events) == [("ADDED", "c4"), ("ADDED", "c5")]


@emulator_only
async def test_drop_watches_ends_streams_and_resume_misses_nothing(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    listed = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    stream = kube_client.watch(
        CONFIG_MAP, namespace=kube_namespace, resource_version=listed.resource_version
    )
    received = []

    async def consume() -> None:
        async for event in stream:
            received.append(event)

    task = asyncio.create_task(consume())
    await kube_client.create(config_map(kube_namespace, "before-drop"))
    for _ in range(200):
        if received:
            break
        await asyncio.sleep(0.01)
    assert kube_emulator.drop_watches() == 1
    await asyncio.wait_for(task, 5)  # iteration ended, no exception
    await kube_client.create(config_map(kube_namespace, "after-drop"))
    resumed = await collect(
        kube_client.watch(
            CONFIG_MAP, namespace=kube_namespace, resource_version=stream.resource_version
        ),
        1,
    )
    assert names(received) == [("ADDED", "before-drop")]
    assert names(resumed) == [("ADDED", "after-drop")]


@emulator_only
async def test_abrupt_drop_also_ends_iteration(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    stream = kube_client.watch(CONFIG_MAP, namespace=kube_namespace, resource_version="1")

    async def consume() -> list[object]:
        return [event async for event in stream]

    task = asyncio.create_task(consume())
    for _ in range(200):
        if kube_emulator.open_watches:
            break
        await asyncio.sleep(0.01)
    assert kube_emulator.drop_watches(abrupt=True) == 1
    await asyncio.wait_for(task, 5)


@emulator_only
async def test_restart_keeps_state_and_port(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    url = kube_emulator.url
    created = await kube_client.create(ars(kube_namespace, "survivor"))
    stream = kube_client.watch(
        AUTOSCALING_RUNNER_SET,
        namespace=kube_namespace,
        resource_version=created["metadata"]["resourceVersion"],
    )
    task = asyncio.create_task(collect(stream, 1, within=5))
    for _ in range(200):
        if kube_emulator.open_watches:
            break
        await asyncio.sleep(0.01)
    await kube_emulator.restart()
    assert await task == []  # the open watch ended with the restart
    assert kube_emulator.url == url
    again = await kube_client.get(AUTOSCALING_RUNNER_SET, "survivor", kube_namespace)
    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    # History survives too: resuming from before the restart replays what came after.
    await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET, "survivor", {"spec": {"minRunners": 2}}, namespace=kube_namespace
    )
    events = await collect(
        kube_client.watch(
            AUTOSCALING_RUNNER_SET,
            namespace=kube_namespace,
            resource_version=created["metadata"]["resourceVersion"],
        ),
        1,
    )
    assert names(events) == [("MODIFIED", "survivor")]


@emulator_only
async def test_client_sends_merge_patch_content_type(
    kube_emulator: KubeEmulator, kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "ct"))
    await kube_client.create(config_map(kube_namespace, "ct"))
    await kube_client.patch_merge(
        AUTOSCALING_RUNNER_SET, "ct", {"spec": {"minRunners": 2}}, namespace=kube_namespace
    )
    await kube_client.patch_merge(CONFIG_MAP, "ct", {"data": {"x": "y"}}, namespace=kube_namespace)
    await kube_client.patch_status(
        AUTOSCALING_RUNNER_SET, "ct", {"phase": "Running"}, namespace=kube_namespace
    )
    patches = [r for r in kube_emulator.requests if r.method == "PATCH"]
    assert [(r.path.rsplit("/", 2)[-2:], r.content_type) for r in patches] == [
        (["autoscalingrunnersets", "ct"], "application/merge-patch+json"),
        (["configmaps", "ct"], "application/merge-patch+json"),
        (["ct", "status"], "application/merge-patch+json"),
    ]


@emulator_only
async def test_emulator_rejects_strategic_merge_on_custom_kinds(
    kube_emulator: KubeEmulator, kube_namespace: str
) -> None:
    """What a real server does with the typed client's default patch type for CRs."""
    from kubernetes_asyncio.client import ApiClient, Configuration, CustomObjectsApi
    from kubernetes_asyncio.client.exceptions import ApiException

    config = Configuration(host=kube_emulator.url)
    async with ApiClient(config) as api:
        custom = CustomObjectsApi(api)
        await custom.create_namespaced_custom_object(
            "actions.github.com",
            "v1alpha1",
            kube_namespace,
            "ephemeralrunnersets",
            {
                "apiVersion": EPHEMERAL_RUNNER_SET.api_version,
                "kind": EPHEMERAL_RUNNER_SET.kind,
                "metadata": {"name": "typed"},
                "spec": {"replicas": 1, "patchID": 0},
            },
        )
        with pytest.raises(ApiException) as caught:
            await custom.patch_namespaced_custom_object(
                "actions.github.com",
                "v1alpha1",
                kube_namespace,
                "ephemeralrunnersets",
                "typed",
                {"spec": {"replicas": 2}},
                _content_type="application/strategic-merge-patch+json",
            )
        assert caught.value.status == 415


@emulator_only
async def test_cancelled_client_watch_is_released_by_the_server(
    kube_emulator: KubeEmulator, kube_client: KubeClient
) -> None:
    # From the list's version: nothing to send (a watch without one would get its ADDED and
    # the initial-events-end BOOKMARK at once), so the read below stays pending.
    listed = await kube_client.list(CONFIG_MAP, namespace="default")
    stream = kube_client.watch(
        CONFIG_MAP, namespace="default", resource_version=listed.resource_version
    )
    pending = asyncio.create_task(anext(stream))
    for _ in range(200):
        if kube_emulator.open_watches:
            break
        await asyncio.sleep(0.01)
    assert kube_emulator.open_watches == 1
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    for _ in range(200):
        if not kube_emulator.open_watches:
            break
        await asyncio.sleep(0.01)
    assert kube_emulator.open_watches == 0
