"""List responses and label selectors (every operator the API accepts)."""

from __future__ import annotations

import pytest

from arcflow.common.kube import CONFIG_MAP, KubeClient
from tests.conformance.helpers import config_map

pytestmark = pytest.mark.integration

LABELS = {
    "one": {"app": "runner", "tier": "small"},
    "two": {"app": "runner", "tier": "large"},
    "three": {"app": "listener"},
    "four": {},
}


@pytest.fixture
async def labelled(kube_client: KubeClient, kube_namespace: str) -> str:
    for name, labels in LABELS.items():
        await kube_client.create(config_map(kube_namespace, name, labels=labels or None))
    return kube_namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=runner", {"one", "two"}),
        ("app==runner", {"one", "two"}),
        ("app!=runner", {"three", "four"}),
        ("tier in (small,medium)", {"one"}),
        ("tier notin (small)", {"two", "three", "four"}),
        ("tier", {"one", "two"}),
        ("!tier", {"three", "four"}),
        ("app=runner,tier!=small", {"two"}),
        ("", {"one", "two", "three", "four"}),
    ],
)
async def test_label_selector(
    kube_client: KubeClient, labelled: str, selector: str, expected: set[str]
) -> None:
    result = await kube_client.list(CONFIG_MAP, namespace=labelled, label_selector=selector)
    # Only this test's objects count: a real namespace holds others (kube-root-ca.crt, ...).
    found = {item["metadata"]["name"] for item in result.items} & set(LABELS)
    assert found == expected


async def test_mapping_selector(kube_client: KubeClient, labelled: str) -> None:
    result = await kube_client.list(
        CONFIG_MAP, namespace=labelled, label_selector={"app": "runner", "tier": "large"}
    )
    assert [item["metadata"]["name"] for item in result.items] == ["two"]


async def test_list_has_resource_version_and_typed_items(
    kube_client: KubeClient, labelled: str
) -> None:
    result = await kube_client.list(CONFIG_MAP, namespace=labelled, label_selector="app")
    assert int(result.resource_version) >= max(
        int(item["metadata"]["resourceVersion"]) for item in result.items
    )
    for item in result.items:
        assert item["kind"] == "ConfigMap"
        assert item["apiVersion"] == "v1"


async def test_list_across_namespaces(kube_client: KubeClient, labelled: str) -> None:
    result = await kube_client.list(CONFIG_MAP, label_selector="app=listener")
    assert {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in result.items} >= {
        (labelled, "three")
    }
