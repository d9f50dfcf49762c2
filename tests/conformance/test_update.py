"""Patches, replace, optimistic concurrency, status subresource and generation rules."""

from __future__ import annotations

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    ConflictError,
    InvalidError,
    KubeClient,
)
from tests.conformance.helpers import ars, config_map

pytestmark = pytest.mark.integration

ARS = AUTOSCALING_RUNNER_SET


async def test_merge_patch_null_deletes_and_lists_replace(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "merge", labels={"a": "1", "b": "2"}))
    patched = await kube_client.patch_merge(
        ARS,
        "merge",
        {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"maxRunners": None}},
        namespace=kube_namespace,
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert "maxRunners" not in patched["spec"]
    assert patched["spec"]["minRunners"] == 1


async def test_stale_resource_version_is_conflict(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "stale"))
    stale_rv = created["metadata"]["resourceVersion"]
    await kube_client.patch_merge(
        ARS, "stale", {"spec": {"minRunners": 2}}, namespace=kube_namespace
    )
    with pytest.raises(ConflictError) as caught:
        await kube_client.patch_merge(
            ARS,
            "stale",
            {"metadata": {"resourceVersion": stale_rv}, "spec": {"minRunners": 3}},
            namespace=kube_namespace,
        )
    assert caught.value.status == 409
    assert not caught.value.already_exists
    assert caught.value.reason == "Conflict"
    current = await kube_client.get(ARS, "stale", kube_namespace)
    assert current["spec"]["minRunners"] == 2


async def test_patch_with_current_resource_version_succeeds(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "fresh"))
    patched = await kube_client.patch_merge(
        ARS,
        "fresh",
        {
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
            "spec": {"minRunners": 4},
        },
        namespace=kube_namespace,
    )
    assert patched["spec"]["minRunners"] == 4
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_replace_needs_current_resource_version(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "put"))
    updated = dict(created, spec={**created["spec"], "minRunners": 2})
    replaced = await kube_client.replace(updated)
    assert replaced["spec"]["minRunners"] == 2
    with pytest.raises(ConflictError) as caught:
        await kube_client.replace(updated)  # still carries the old resourceVersion
    assert not caught.value.already_exists


async def test_json_patch_test_op_guards_the_write(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(ars(kube_namespace, "jp", finalizers=["example.com/a"]))
    patched = await kube_client.patch_json(
        ARS,
        "jp",
        [
            {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/a"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": []},
        ],
        namespace=kube_namespace,
    )
    assert not patched["metadata"].get("finalizers")
    with pytest.raises(InvalidError):
        await kube_client.patch_json(
            ARS,
            "jp",
            [{"op": "test", "path": "/spec/minRunners", "value": 99}],
            namespace=kube_namespace,
        )


async def test_status_subresource_changes_only_status(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "status"))
    via_status = await kube_client.patch_status(
        ARS, "status", {"phase": "Running", "currentRunners": 2}, namespace=kube_namespace
    )
    assert via_status["status"]["phase"] == "Running"
    assert via_status["metadata"]["generation"] == created["metadata"]["generation"]
    sneaky = await kube_client.patch_json(
        ARS,
        "status",
        [
            {"op": "replace", "path": "/spec/minRunners", "value": 3},
            {"op": "replace", "path": "/status/phase", "value": "Outdated"},
        ],
        namespace=kube_namespace,
        subresource="status",
    )
    assert sneaky["spec"]["minRunners"] == 1
    assert sneaky["status"]["phase"] == "Outdated"


async def test_main_resource_ignores_status(kube_client: KubeClient, kube_namespace: str) -> None:
    await kube_client.create(ars(kube_namespace, "mainres"))
    await kube_client.patch_status(ARS, "mainres", {"phase": "Running"}, namespace=kube_namespace)
    patched = await kube_client.patch_merge(
        ARS,
        "mainres",
        {"status": {"phase": "Outdated"}, "spec": {"minRunners": 2}},
        namespace=kube_namespace,
    )
    assert patched["status"]["phase"] == "Running"
    assert patched["spec"]["minRunners"] == 2


async def test_generation_bumps_on_spec_changes_only(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(ars(kube_namespace, "gen"))
    assert created["metadata"]["generation"] == 1
    labelled = await kube_client.patch_merge(
        ARS,
        "gen",
        {"metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}},
        namespace=kube_namespace,
    )
    assert labelled["metadata"]["generation"] == 1
    status = await kube_client.patch_status(
        ARS, "gen", {"phase": "Running"}, namespace=kube_namespace
    )
    assert status["metadata"]["generation"] == 1
    spec = await kube_client.patch_merge(
        ARS, "gen", {"spec": {"minRunners": 3}}, namespace=kube_namespace
    )
    assert spec["metadata"]["generation"] == 2


async def test_no_op_patch_keeps_resource_version(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    created = await kube_client.create(config_map(kube_namespace, "noop"))
    same = await kube_client.patch_merge(
        CONFIG_MAP, "noop", {"data": {"k": "v"}}, namespace=kube_namespace
    )
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
