"""The emulator's state machine without HTTP: GC, history, namespaces, CRDs."""

from __future__ import annotations

import pytest

from arcflow.common.kube import CONFIG_MAP, CUSTOM_RESOURCE_DEFINITION, NAMESPACE
from arcflow.devstack.kube_emulator.status import ApiStatus
from arcflow.devstack.kube_emulator.store import DeleteOptions, ObjectStore


def cm(name: str, ns: str = "a", **meta: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


def owned_by(owner: dict[str, object]) -> list[dict[str, object]]:
    meta = owner["metadata"]
    assert isinstance(meta, dict)
    return [{"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}]


def test_dependent_created_after_owner_is_gone_is_collected() -> None:
    store = ObjectStore()
    owner = store.create(CONFIG_MAP, "a", cm("owner"))
    store.delete(CONFIG_MAP, "a", "owner", DeleteOptions())
    store.create(CONFIG_MAP, "a", cm("late", ownerReferences=owned_by(owner)))
    with pytest.raises(ApiStatus) as caught:
        store.get(CONFIG_MAP, "a", "late")
    assert caught.value.code == 404


def test_dangling_reference_is_dropped_when_another_owner_remains() -> None:
    store = ObjectStore()
    first = store.create(CONFIG_MAP, "a", cm("first"))
    second = store.create(CONFIG_MAP, "a", cm("second"))
    refs = owned_by(first) + owned_by(second)
    store.create(CONFIG_MAP, "a", cm("child", ownerReferences=refs))
    store.delete(CONFIG_MAP, "a", "first", DeleteOptions())
    child = store.get(CONFIG_MAP, "a", "child")
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["second"]


def test_cross_namespace_owner_counts_as_absent() -> None:
    store = ObjectStore()
    owner = store.create(CONFIG_MAP, "a", cm("owner"))
    store.create(CONFIG_MAP, "b", cm("stray", ownerReferences=owned_by(owner)))
    with pytest.raises(ApiStatus):
        store.get(CONFIG_MAP, "b", "stray")


def test_history_is_bounded_and_compaction_moves_forward() -> None:
    store = ObjectStore(history_limit=2)
    for index in range(5):
        store.create(CONFIG_MAP, "a", cm(f"c{index}"))
    assert len(store.history) == 2
    assert store.compacted_rv == store.resource_version - 2
    store.compact()
    assert not store.history
    assert store.compacted_rv == store.resource_version


def test_namespace_deletion_removes_contents_then_itself() -> None:
    store = ObjectStore()
    store.create(CONFIG_MAP, "doomed", cm("x"))
    store.create(CONFIG_MAP, "doomed", cm("held", finalizers=["example.com/f"]))
    store.delete(NAMESPACE, None, "doomed", DeleteOptions())
    namespace = store.get(NAMESPACE, None, "doomed")
    assert namespace["status"]["phase"] == "Terminating"
    with pytest.raises(ApiStatus) as caught:
        store.create(CONFIG_MAP, "doomed", cm("new"))
    assert caught.value.code == 403
    store.patch(
        CONFIG_MAP,
        "doomed",
        "held",
        "application/merge-patch+json",
        {"metadata": {"finalizers": None}},
    )
    with pytest.raises(ApiStatus):
        store.get(NAMESPACE, None, "doomed")


def test_crd_registers_a_new_kind() -> None:
    store = ObjectStore()
    store.create(
        CUSTOM_RESOURCE_DEFINITION,
        None,
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
                "versions": [{"name": "v1", "served": True, "subresources": {"status": {}}}],
            },
        },
    )
    widget = store.find("example.com", "v1", "widgets")
    assert widget.has_status
    assert widget.namespaced
    created = store.create(
        widget, "a", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    )
    assert created["metadata"]["generation"] == 1


def test_resource_version_on_create_is_refused() -> None:
    store = ObjectStore()
    with pytest.raises(ApiStatus) as caught:
        store.create(CONFIG_MAP, "a", cm("x", resourceVersion="5"))
    assert caught.value.code == 500


def test_mismatched_kind_is_bad_request() -> None:
    store = ObjectStore()
    with pytest.raises(ApiStatus) as caught:
        store.create(
            CONFIG_MAP, "a", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}
        )
    assert caught.value.code == 400
