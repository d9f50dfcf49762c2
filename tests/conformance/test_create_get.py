"""Create, get, generateName, 404 and 409-on-duplicate, as a real API server answers them."""

from __future__ import annotations

import re

import pytest

from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    SECRET,
    ConflictError,
    InvalidError,
    KubeClient,
    NotFoundError,
)
from tests.conformance.helpers import ars, config_map

pytestmark = pytest.mark.integration


async def test_create_stamps_server_fields_and_drops_status(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    manifest = ars(kube_namespace, "created")
    manifest["status"] = {"phase": "Running"}
    created = await kube_client.create(manifest)
    meta = created["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert int(meta["resourceVersion"]) > 0
    assert meta["generation"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert created["kind"] == "AutoscalingRunnerSet"
    assert "status" not in created or created["status"].get("phase") != "Running"
    fetched = await kube_client.get(AUTOSCALING_RUNNER_SET, "created", kube_namespace)
    assert fetched["metadata"]["uid"] == meta["uid"]
    assert fetched["spec"]["minRunners"] == 1


async def test_resource_versions_increase_across_kinds(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    first = await kube_client.create(config_map(kube_namespace, "rv-a"))
    second = await kube_client.create(ars(kube_namespace, "rv-b"))
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


async def test_generate_name_appends_five_characters(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    manifest = ars(kube_namespace, "unused")
    del manifest["metadata"]["name"]
    manifest["metadata"]["generateName"] = "demo-runner-"
    first = await kube_client.create(manifest)
    second = await kube_client.create(manifest)
    for obj in (first, second):
        assert re.fullmatch(r"demo-runner-[a-z0-9]{5}", obj["metadata"]["name"])
    assert first["metadata"]["name"] != second["metadata"]["name"]


async def test_get_missing_is_not_found_with_status_body(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    with pytest.raises(NotFoundError) as caught:
        await kube_client.get(AUTOSCALING_RUNNER_SET, "nope", kube_namespace)
    assert caught.value.status == 404
    assert caught.value.reason == "NotFound"
    assert caught.value.details["name"] == "nope"
    assert caught.value.details["group"] == "actions.github.com"
    assert '"nope" not found' in caught.value.message


async def test_duplicate_name_is_already_exists(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    await kube_client.create(config_map(kube_namespace, "dup"))
    with pytest.raises(ConflictError) as caught:
        await kube_client.create(config_map(kube_namespace, "dup"))
    assert caught.value.status == 409
    assert caught.value.already_exists
    assert caught.value.reason == "AlreadyExists"


async def test_invalid_name_is_422(kube_client: KubeClient, kube_namespace: str) -> None:
    with pytest.raises(InvalidError) as caught:
        await kube_client.create(config_map(kube_namespace, "Not_A_DNS_Name"))
    assert caught.value.status == 422
    assert caught.value.causes


async def test_invalid_label_value_is_422(kube_client: KubeClient, kube_namespace: str) -> None:
    with pytest.raises(InvalidError):
        await kube_client.create(config_map(kube_namespace, "badlabel", labels={"a": "x" * 64}))


async def test_secret_data_never_in_errors(kube_client: KubeClient, kube_namespace: str) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": kube_namespace},
        "stringData": {"token": "ghp_supersecretvalue"},
    }
    await kube_client.create(secret)
    with pytest.raises(ConflictError) as caught:
        await kube_client.create(secret)
    assert "ghp_supersecretvalue" not in str(caught.value)
    assert "ghp_supersecretvalue" not in repr(caught.value)
    fetched = await kube_client.get(SECRET, "creds", kube_namespace)
    assert fetched["metadata"]["name"] == "creds"


async def test_delete_missing_is_not_found(kube_client: KubeClient, kube_namespace: str) -> None:
    with pytest.raises(NotFoundError):
        await kube_client.delete(CONFIG_MAP, "never-was", namespace=kube_namespace)
