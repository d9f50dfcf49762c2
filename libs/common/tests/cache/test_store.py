"""The cache store: indexes, resourceVersion order, tombstones, relist diffs (pure)."""

from __future__ import annotations

from typing import Any

from arcflow.common.cache import KindStore, is_older


def obj(
    name: str,
    rv: str,
    *,
    ns: str = "ns",
    labels: dict[str, str] | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "resourceVersion": rv,
        "labels": labels or {},
    }
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "X", "name": "o"}]
    return {"kind": "EphemeralRunner", "metadata": meta}


def test_is_older_compares_integers_and_lets_opaque_versions_through() -> None:
    assert is_older("9", "10")
    assert not is_older("10", "9")
    assert not is_older("a", "b")
    assert not is_older("", "3")


def test_older_versions_never_replace_newer_ones() -> None:
    store = KindStore("EphemeralRunner")
    assert store.upsert(obj("a", "5")) is not None
    assert store.upsert(obj("a", "4")) is None  # a late watch echo of an older write
    assert store.upsert(obj("a", "5")) is None  # the same version again: no change
    change = store.upsert(obj("a", "6"))
    assert change is not None
    assert change.type == "MODIFIED"
    assert store.get("ns", "a")["metadata"]["resourceVersion"] == "6"


def test_a_deleted_object_does_not_come_back_from_a_stale_event() -> None:
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "5"))
    assert store.remove("ns", "a", "7") is not None
    assert store.upsert(obj("a", "6")) is None  # older than the deletion
    assert store.get("ns", "a") is None
    assert store.upsert(obj("a", "8")) is not None  # recreated under the same name


def test_a_delete_older_than_the_held_object_is_ignored() -> None:
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "9"))
    assert store.remove("ns", "a", "3") is None
    assert store.get("ns", "a") is not None


def test_indexes_by_label_owner_and_namespace_follow_updates() -> None:
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "1", labels={"set": "x"}, owner="u1"))
    store.upsert(obj("b", "2", labels={"set": "x"}, owner="u2"))
    store.upsert(obj("c", "3", ns="other", labels={"set": "x"}, owner="u1"))
    assert [o["metadata"]["name"] for o in store.list("ns", labels={"set": "x"})] == ["a", "b"]
    assert [o["metadata"]["name"] for o in store.list(owner_uid="u1")] == ["a", "c"]
    store.upsert(obj("a", "4", labels={"set": "y"}, owner="u2"))
    assert [o["metadata"]["name"] for o in store.list(labels={"set": "x"})] == ["b", "c"]
    assert [o["metadata"]["name"] for o in store.list(owner_uid="u2")] == ["a", "b"]
    store.remove("ns", "b", "5")
    assert [o["metadata"]["name"] for o in store.list(labels={"set": "x"})] == ["c"]


def test_reads_are_copies() -> None:
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "1"))
    got = store.get("ns", "a")
    got["metadata"]["name"] = "mutated"
    assert store.get("ns", "a")["metadata"]["name"] == "a"


def test_relist_reports_additions_changes_and_deletions() -> None:
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "1"))
    store.upsert(obj("b", "2"))
    changes = store.replace_all([obj("b", "3"), obj("c", "4")])
    assert sorted((c.type, c.obj["metadata"]["name"]) for c in changes) == [
        ("ADDED", "c"),
        ("DELETED", "a"),
        ("MODIFIED", "b"),
    ]
    assert store.object_keys() == [("ns", "b"), ("ns", "c")]


def test_reads_copy_nested_lists_and_keep_values() -> None:
    store = KindStore("EphemeralRunner")
    manifest = obj("a", "1")
    manifest["spec"] = {"containers": [{"env": [{"name": "X", "value": "1"}]}], "n": 1.5}
    store.upsert(manifest)
    got = store.list()[0]
    assert got == manifest
    got["spec"]["containers"][0]["env"].append({"name": "Y"})
    got["spec"]["containers"].clear()
    assert store.list()[0]["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}]
    manifest["spec"]["containers"][0]["env"].clear()  # the caller's own object after upsert
    assert store.get("ns", "a")["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}]


def test_a_relist_of_one_namespace_leaves_the_others_alone() -> None:
    """Several per-namespace list+watches feed one store: one namespace's relist can only
    drop that namespace's objects."""
    store = KindStore("EphemeralRunner")
    store.upsert(obj("a", "1", ns="team-a"))
    store.upsert(obj("gone", "2", ns="team-a"))
    store.upsert(obj("b", "3", ns="team-b"))
    changes = store.replace_all([obj("a", "4", ns="team-a")], "team-a")
    assert sorted((c.type, c.obj["metadata"]["name"]) for c in changes) == [
        ("DELETED", "gone"),
        ("MODIFIED", "a"),
    ]
    assert store.object_keys() == [("team-a", "a"), ("team-b", "b")]
    # An empty list of team-b empties team-b only.
    assert [c.type for c in store.replace_all([], "team-b")] == ["DELETED"]
    assert store.object_keys() == [("team-a", "a")]
