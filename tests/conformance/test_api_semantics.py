"""API semantics pinned on both backends: patch content types, the status split, finalizers,
foreground GC, field selectors, bookmarks, defaulting. Each answer here is what the real
kube-apiserver gave; the emulator must give the same."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    ConflictError,
    KubeApiError,
    KubeClient,
)
from tests.conformance.conftest import Backend
from tests.conformance.helpers import DEADLINE, ars, collect, config_map, owner_ref, wait_gone
from tests.polling import eventually

pytestmark = pytest.mark.integration

ARS = AUTOSCALING_RUNNER_SET
FINALIZER = "example.com/hold"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def _ars_path(backend: Backend, name: str, sub: str = "") -> str:
    return ARS.path(backend.namespace, name, sub or None)


# --- patch content types ----------------------------------------------------------------


async def test_json_patch_body_sent_as_merge_patch_is_refused(backend: Backend) -> None:
    """What a client that sends json-patch ops under the merge Content-Type gets: 400, and
    nothing written."""
    created = await backend.client.create(ars(backend.namespace, "wrong-type"))
    status, body = await backend.raw(
        "PATCH",
        _ars_path(backend, "wrong-type"),
        [{"op": "replace", "path": "/spec/minRunners", "value": 3}],
        content_type=MERGE,
    )
    assert (status, body["kind"], body["reason"], body["code"]) == (
        400,
        "Status",
        "BadRequest",
        400,
    )
    after = await backend.client.get(ARS, "wrong-type", backend.namespace)
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert after["spec"]["minRunners"] == 1


async def test_strategic_merge_patch_on_a_custom_kind_is_415(backend: Backend) -> None:
    await backend.client.create(ars(backend.namespace, "smp"))
    status, body = await backend.raw(
        "PATCH", _ars_path(backend, "smp"), {"spec": {"minRunners": 2}}, content_type=STRATEGIC
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert STRATEGIC not in body["message"]  # the accepted types it lists exclude it
    assert MERGE in body["message"]
    assert (await backend.client.get(ARS, "smp", backend.namespace))["spec"]["minRunners"] == 1


async def test_strategic_merge_patch_on_a_config_map_merges_maps(backend: Backend) -> None:
    await backend.client.create(config_map(backend.namespace, "smp-cm"))
    status, body = await backend.raw(
        "PATCH",
        CONFIG_MAP.path(backend.namespace, "smp-cm"),
        {"data": {"added": "1"}, "metadata": {"labels": {"x": "y"}}},
        content_type=STRATEGIC,
    )
    assert status == 200, body
    assert body["data"] == {"k": "v", "added": "1"}
    assert body["metadata"]["labels"] == {"x": "y"}


async def test_merge_patch_on_a_config_map_needs_no_strategic_type(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(config_map(kube_namespace, "merge-cm"))
    patched = await kube_client.patch_merge(
        CONFIG_MAP, "merge-cm", {"data": {"k": None, "n": "2"}}, namespace=kube_namespace
    )
    assert patched["data"] == {"n": "2"}


# --- status subresource -----------------------------------------------------------------


async def test_status_patch_leaves_spec_and_metadata_alone(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "st", labels={"a": "1"}))
    patched = await kube_client.patch_json(
        ARS,
        "st",
        [
            {"op": "add", "path": "/status", "value": {"phase": "Running"}},
            {"op": "replace", "path": "/spec/minRunners", "value": 4},
            {"op": "replace", "path": "/metadata/labels", "value": {"a": "2"}},
        ],
        namespace=kube_namespace,
        subresource="status",
    )
    stored = await kube_client.get(ARS, "st", kube_namespace)
    for obj in (patched, stored):
        assert obj["status"]["phase"] == "Running"
        assert obj["spec"]["minRunners"] == 1
        assert obj["metadata"]["labels"] == {"a": "1"}
        assert obj["metadata"]["generation"] == created["metadata"]["generation"]


async def test_main_resource_put_leaves_status_alone(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "put-st"))
    with_status = await kube_client.patch_status(
        ARS, "put-st", {"phase": "Running"}, namespace=kube_namespace
    )
    replaced = await kube_client.replace(
        {**with_status, "spec": {**with_status["spec"], "minRunners": 2}, "status": {}}
    )
    assert replaced["status"] == {"phase": "Running"}
    assert replaced["spec"]["minRunners"] == 2


# --- optimistic concurrency -----------------------------------------------------------


async def test_delete_with_a_stale_resource_version_is_conflict(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(config_map(kube_namespace, "stale-del"))
    await kube_client.patch_merge(
        CONFIG_MAP, "stale-del", {"data": {"k": "w"}}, namespace=kube_namespace
    )
    with pytest.raises(ConflictError) as caught:
        await kube_client.delete(
            CONFIG_MAP,
            "stale-del",
            namespace=kube_namespace,
            resource_version=created["metadata"]["resourceVersion"],
        )
    assert not caught.value.already_exists
    assert (await kube_client.get(CONFIG_MAP, "stale-del", kube_namespace))["data"] == {"k": "w"}


# --- finalizers ---------------------------------------------------------------------------


async def test_removing_the_last_finalizer_answers_the_stored_version(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """The write that removes the last finalizer deletes the object: its answer is the object
    as patched (no finalizers, still a deletionTimestamp) at the resourceVersion it was
    stored under, and the watch's DELETED event carries the stored object (finalizer still
    listed) under a newer version."""
    await kube_client.create(ars(kube_namespace, "last", finalizers=[FINALIZER]))
    deleting = await kube_client.delete(ARS, "last", namespace=kube_namespace)
    stored = await kube_client.get(ARS, "last", kube_namespace)
    assert deleting["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["resourceVersion"] == deleting["metadata"]["resourceVersion"]
    # A second delete of an object that is already being deleted changes nothing.
    again = await kube_client.delete(ARS, "last", namespace=kube_namespace)
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    stored_rv = stored["metadata"]["resourceVersion"]
    removed = await kube_client.patch_merge(
        ARS, "last", {"metadata": {"finalizers": None}}, namespace=kube_namespace
    )
    assert removed["metadata"]["resourceVersion"] == stored_rv
    assert not removed["metadata"].get("finalizers")
    assert removed["metadata"]["deletionTimestamp"] == stored["metadata"]["deletionTimestamp"]
    await wait_gone(kube_client, ARS, "last", kube_namespace)
    events = await collect(
        kube_client.watch(ARS, namespace=kube_namespace, resource_version=stored_rv), 1
    )
    assert [e.type for e in events] == ["DELETED"]
    assert int(events[0].object["metadata"]["resourceVersion"]) > int(stored_rv)
    assert events[0].object["metadata"]["finalizers"] == [FINALIZER]


# --- garbage collection ---------------------------------------------------------------


async def test_foreground_owner_waits_for_a_held_dependent(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(ars(kube_namespace, "fg-owner"))
    await kube_client.create(
        config_map(kube_namespace, "fg-held", owner=owner, finalizers=[FINALIZER])
    )
    await kube_client.delete(
        ARS, "fg-owner", namespace=kube_namespace, propagation_policy="Foreground"
    )

    async def dependent_deleting() -> bool:
        held = await kube_client.get(CONFIG_MAP, "fg-held", kube_namespace)
        return bool(held["metadata"].get("deletionTimestamp"))

    await eventually(
        dependent_deleting, within=DEADLINE, what="the collector deleting the dependent"
    )
    waiting = await kube_client.get(ARS, "fg-owner", kube_namespace)
    assert waiting["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in waiting["metadata"]["finalizers"]
    await kube_client.patch_merge(
        CONFIG_MAP, "fg-held", {"metadata": {"finalizers": None}}, namespace=kube_namespace
    )
    await wait_gone(kube_client, CONFIG_MAP, "fg-held", kube_namespace)
    await wait_gone(kube_client, ARS, "fg-owner", kube_namespace)


async def test_background_collects_dependents_of_several_kinds(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    owner = await kube_client.create(config_map(kube_namespace, "bg-owner"))
    await kube_client.create(
        {
            **ars(kube_namespace, "bg-ars"),
            "metadata": {
                "name": "bg-ars",
                "namespace": kube_namespace,
                "ownerReferences": [owner_ref(owner)],
            },
        }
    )
    await kube_client.create(config_map(kube_namespace, "bg-cm", owner=owner))
    await kube_client.delete(CONFIG_MAP, "bg-owner", namespace=kube_namespace)
    await wait_gone(kube_client, ARS, "bg-ars", kube_namespace)
    await wait_gone(kube_client, CONFIG_MAP, "bg-cm", kube_namespace)


# --- selectors ------------------------------------------------------------------------


async def test_field_selectors_on_metadata(kube_client: KubeClient, kube_namespace: str) -> None:
    for name in ("fs-a", "fs-b"):
        await kube_client.create(ars(kube_namespace, name))
    by_name = await kube_client.list(
        ARS, namespace=kube_namespace, field_selector="metadata.name=fs-a"
    )
    assert [i["metadata"]["name"] for i in by_name.items] == ["fs-a"]
    not_a = await kube_client.list(
        ARS, namespace=kube_namespace, field_selector="metadata.name!=fs-a"
    )
    assert [i["metadata"]["name"] for i in not_a.items] == ["fs-b"]
    across = await kube_client.list(
        ARS, field_selector=f"metadata.namespace={kube_namespace},metadata.name=fs-b"
    )
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in across.items] == [
        (kube_namespace, "fs-b")
    ]


@pytest.mark.parametrize(
    ("resource", "selector"),
    [(ARS, "spec.minRunners=1"), (CONFIG_MAP, "data.k=v")],
    ids=["custom-kind", "config-map"],
)
async def test_field_selector_on_an_unindexed_field_is_400(
    kube_client: KubeClient, kube_namespace: str, resource: object, selector: str
) -> None:
    with pytest.raises(KubeApiError) as caught:
        await kube_client.list(resource, namespace=kube_namespace, field_selector=selector)  # type: ignore[arg-type]
    assert caught.value.status == 400
    assert caught.value.reason == "BadRequest"
    assert selector.split("=")[0] in caught.value.message


# --- bookmarks ------------------------------------------------------------------------


async def test_watch_without_version_ends_initial_events_with_a_bookmark(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """``KubeClient.watch`` always sends ``allowWatchBookmarks=true``: after the ADDED for
    what exists, the server sends a BOOKMARK annotated ``k8s.io/initial-events-end`` whose
    version is at least every object's."""
    created = [await kube_client.create(ars(kube_namespace, f"bm-{i}")) for i in range(2)]
    seen = []
    async with asyncio.timeout(DEADLINE):
        async with kube_client.watch(ARS, namespace=kube_namespace) as stream:
            async for event in stream:
                seen.append(event)
                if event.type == "BOOKMARK":
                    break
    assert [e.type for e in seen] == ["ADDED", "ADDED", "BOOKMARK"]
    bookmark = seen[-1].object
    assert bookmark["kind"] == "AutoscalingRunnerSet"
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= max(
        int(c["metadata"]["resourceVersion"]) for c in created
    )
    assert stream.resource_version == bookmark["metadata"]["resourceVersion"]


# --- defaulting and pruning -------------------------------------------------------------


async def test_the_crds_default_nothing(kube_client: KubeClient, kube_namespace: str) -> None:
    """arcflow's CRDs set no ``default``: what a user leaves out stays out (the controllers
    apply the model's defaults, never the server)."""
    manifest = ars(kube_namespace, "no-defaults")
    for key in ("minRunners", "maxRunners"):
        del manifest["spec"][key]
    created = await kube_client.create(manifest)
    assert created["spec"] == manifest["spec"]
    assert (await kube_client.get(ARS, "no-defaults", kube_namespace))["spec"] == manifest["spec"]
