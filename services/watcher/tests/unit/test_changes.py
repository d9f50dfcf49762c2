"""The pure core: summaries, list diffs, watch-event classification, resume points."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common import constants
from arcflow.common.events import msg_id, parse_event
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, POD, SECRET
from arcflow.watcher.changes import (
    Change,
    KindCache,
    MalformedObjectError,
    ObjectSummary,
    ResumePoint,
    build_event,
    change_for_watch_event,
    diff_listing,
    identity_of,
    resource_version_of,
    resume_key,
    resync_changes,
    subject_for,
    summarize,
)


def manifest(
    name: str,
    rv: str,
    *,
    uid: str | None = None,
    namespace: str = "arc",
    labels: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": rv,
        "labels": labels or {},
    }
    meta.update(extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"x": 1}}


def obj(name: str, rv: str, *, uid: str | None = None, **kw: Any) -> ObjectSummary:
    return summarize(manifest(name, rv, uid=uid, **kw))


# --- summarize ------------------------------------------------------------------------------


def test_summarize_keeps_metadata_only() -> None:
    item = manifest(
        "runner-1",
        "42",
        generation=3,
        labels={constants.LABEL_SCALE_SET_NAME: "arc"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
        ownerReferences=[
            {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
             "name": "runner-1", "uid": "u-er", "controller": True}
        ],
        deletionTimestamp="2026-11-29T10:00:00Z",
    )  # fmt: skip
    summary = summarize(item)
    assert summary.name == "runner-1"
    assert summary.namespace == "arc"
    assert summary.uid == "uid-runner-1"
    assert summary.resource_version == "42"
    assert summary.generation == 3
    assert summary.labels == {constants.LABEL_SCALE_SET_NAME: "arc"}
    assert summary.owner_references[0].kind == "EphemeralRunner"
    assert summary.owner_references[0].controller is True
    assert summary.deletion_timestamp is not None
    assert "annotations" not in summary.model_dump()
    assert "spec" not in summary.model_dump()


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("not-an-object", "item is a str"),
        (["a"], "item is a list"),
        ({"kind": "Pod"}, "no metadata"),
        ({"metadata": "x"}, "no metadata"),
        ({"metadata": {"namespace": "arc", "uid": "u", "resourceVersion": "1"}}, "metadata.name"),
        ({"metadata": {"name": "", "namespace": "arc", "uid": "u", "resourceVersion": "1"}},
         "metadata.name"),
        ({"metadata": {"name": "a", "uid": "u", "resourceVersion": "1"}}, "metadata.namespace"),
        ({"metadata": {"name": "a", "namespace": "arc", "resourceVersion": "1"}}, "metadata.uid"),
        ({"metadata": {"name": "a", "namespace": "arc", "uid": "u"}}, "metadata.resourceVersion"),
        ({"metadata": {"name": "a", "namespace": "arc", "uid": "u", "resourceVersion": 5}},
         "metadata.resourceVersion"),
        ({"metadata": {"name": "Bad Name", "namespace": "arc", "uid": "u",
                       "resourceVersion": "1"}}, "subject token"),
        ({"metadata": {"name": "a", "namespace": "arc", "uid": "u", "resourceVersion": "1",
                       "generation": "2"}}, "generation"),
        ({"metadata": {"name": "a", "namespace": "arc", "uid": "u", "resourceVersion": "1",
                       "labels": {"k": 1}}}, "labels"),
        ({"metadata": {"name": "a", "namespace": "arc", "uid": "u", "resourceVersion": "1",
                       "ownerReferences": [{"kind": "X"}]}}, "ownerReferences"),
    ],
)  # fmt: skip
def test_summarize_rejects_malformed_objects_with_reason(item: object, reason: str) -> None:
    with pytest.raises(MalformedObjectError, match=reason):
        summarize(item)


def test_malformed_error_never_carries_field_values() -> None:
    secret = {
        "metadata": {"name": "jit", "namespace": "arc", "uid": "u", "resourceVersion": "1",
                     "labels": {"token": {"nested": "ghs_supersecretvalue123"}}},
        "data": {"jitToken": "c2VjcmV0"},
    }  # fmt: skip
    with pytest.raises(MalformedObjectError) as info:
        summarize(secret)
    assert "ghs_" not in str(info.value)
    assert "c2VjcmV0" not in str(info.value)
    assert "arc/jit" in str(info.value)


def test_resource_version_of_tolerates_anything() -> None:
    assert resource_version_of({"metadata": {"resourceVersion": "9"}}) == "9"
    assert resource_version_of({"metadata": {}}) is None
    assert resource_version_of("x") is None
    assert resource_version_of({"metadata": []}) is None


# --- diff_listing ---------------------------------------------------------------------------


def test_diff_empty_cache_adds_everything_in_list_order() -> None:
    listed = [obj("b", "1"), obj("a", "2")]
    changes = diff_listing({}, listed)
    assert [(c.change, c.obj.name) for c in changes] == [("ADDED", "b"), ("ADDED", "a")]


def test_diff_detects_added_modified_deleted_and_unchanged() -> None:
    cache = KindCache.empty()
    for o in (obj("keep", "1"), obj("change", "1"), obj("gone-b", "1"), obj("gone-a", "1")):
        cache.apply(Change("ADDED", o))
    listed = [obj("keep", "1"), obj("change", "5"), obj("new", "6")]
    changes = diff_listing(cache.objects, listed)
    assert [(c.change, c.obj.name, c.obj.resource_version) for c in changes] == [
        ("DELETED", "gone-a", "1"),
        ("DELETED", "gone-b", "1"),
        ("MODIFIED", "change", "5"),
        ("ADDED", "new", "6"),
    ]


def test_diff_recreated_under_same_name_is_delete_then_add() -> None:
    cached = {"u1": obj("runner", "1", uid="u1")}
    changes = diff_listing(cached, [obj("runner", "7", uid="u2")])
    assert [(c.change, c.obj.uid) for c in changes] == [("DELETED", "u1"), ("ADDED", "u2")]


def test_diff_keeps_objects_whose_listed_item_was_unreadable() -> None:
    cached = {"uid-a": obj("a", "1"), "uid-b": obj("b", "1")}
    changes = diff_listing(cached, [obj("b", "1")], unreadable={("arc", "a")})
    assert changes == []
    # Another namespace's "a" does not protect this one.
    changes = diff_listing(cached, [obj("b", "1")], unreadable={("other", "a")})
    assert [(c.change, c.obj.name) for c in changes] == [("DELETED", "a")]


def test_identity_of_reads_what_it_can() -> None:
    assert identity_of({"metadata": {"namespace": "arc", "name": "x"}}) == ("arc", "x")
    assert identity_of({"metadata": {"name": "x"}}) is None
    assert identity_of(3) is None


def test_diff_same_list_twice_is_quiet() -> None:
    listed = [obj("a", "1"), obj("b", "2")]
    cache = KindCache.empty()
    for change in diff_listing(cache.objects, listed):
        cache.apply(change)
    assert diff_listing(cache.objects, listed) == []


_names = st.sampled_from(["a", "b", "c", "d", "e"])
_states = st.dictionaries(_names, st.integers(min_value=1, max_value=4), max_size=5)


@given(before=_states, after=_states)
def test_applying_the_diff_reproduces_the_fresh_list(
    before: dict[str, int], after: dict[str, int]
) -> None:
    cache = KindCache.empty()
    for name, rv in before.items():
        cache.apply(Change("ADDED", obj(name, str(rv))))
    listed = [obj(name, str(rv)) for name, rv in after.items()]
    changes = diff_listing(cache.objects, listed)
    for change in changes:
        cache.apply(change)
    assert cache.objects == {o.uid: o for o in listed}
    # Exactly one change per object that differs, none for the rest.
    differing = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    assert sorted(c.obj.name for c in changes) == sorted(differing)


# --- change_for_watch_event -----------------------------------------------------------------


def test_watch_event_classified_against_the_cache() -> None:
    cached = {"uid-a": obj("a", "1")}
    assert change_for_watch_event(cached, "ADDED", obj("a", "1")) is None  # replay
    assert change_for_watch_event(cached, "MODIFIED", obj("a", "1")) is None
    assert change_for_watch_event(cached, "ADDED", obj("a", "2")) == Change(
        "MODIFIED", obj("a", "2")
    )
    assert change_for_watch_event(cached, "MODIFIED", obj("b", "3")) == Change(
        "ADDED", obj("b", "3")
    )
    assert change_for_watch_event(cached, "DELETED", obj("a", "4")) == Change(
        "DELETED", obj("a", "4")
    )
    assert change_for_watch_event({}, "DELETED", obj("z", "4")) == Change("DELETED", obj("z", "4"))


def test_watch_event_rejects_non_object_types() -> None:
    with pytest.raises(ValueError, match="BOOKMARK"):
        change_for_watch_event({}, "BOOKMARK", obj("a", "1"))


def test_cache_apply_and_lookup_by_name() -> None:
    cache = KindCache.empty()
    cache.apply(Change("ADDED", obj("a", "1")))
    cache.apply(Change("MODIFIED", obj("a", "2")))
    found = cache.by_name("arc", "a")
    assert found is not None
    assert found.resource_version == "2"
    cache.apply(Change("DELETED", obj("a", "3")))
    assert cache.by_name("arc", "a") is None
    assert cache.objects == {}


def test_resync_changes_cover_every_cached_object_in_stable_order() -> None:
    cached = {o.uid: o for o in (obj("b", "1"), obj("a", "2"))}
    assert [(c.change, c.obj.name) for c in resync_changes(cached)] == [
        ("RESYNC", "a"),
        ("RESYNC", "b"),
    ]


# --- events ---------------------------------------------------------------------------------


def test_event_subject_keys_and_msg_id() -> None:
    pod = obj("runner.x", "12", labels={constants.LABEL_SCALE_SET_NAME: "arc-set"}, generation=1)
    event = build_event(POD, Change("MODIFIED", pod))
    assert subject_for(POD, pod) == "arc.k8s.pods.arc.runner~x"
    assert event.kind == "Pod"
    assert event.resource == "pods"
    assert event.change == "MODIFIED"
    assert event.resource_version == "12"
    assert event.generation == 1
    assert event.keys.namespace == "arc"
    assert event.keys.ars == "arc-set"
    assert msg_id(event) == "k8s.object.changed:uid-runner.x:12:MODIFIED"
    # The same fact built again (a replay) gets the same Nats-Msg-Id, another event id.
    again = build_event(POD, Change("MODIFIED", pod))
    assert msg_id(again) == msg_id(event)
    assert again.id != event.id
    # Different change type or resourceVersion: a different id.
    assert msg_id(build_event(POD, Change("DELETED", pod))) != msg_id(event)


def test_ars_event_keys_itself_and_round_trips() -> None:
    ars = obj("my-ars", "3")
    event = build_event(AUTOSCALING_RUNNER_SET, Change("ADDED", ars))
    assert event.keys.ars == "my-ars"
    assert event.api_version == "actions.github.com/v1alpha1"
    parsed = parse_event(event.model_dump_json())
    assert parsed == event


def test_resync_events_get_distinct_msg_ids_per_round() -> None:
    runner = obj("r", "3")
    first = build_event(EPHEMERAL_RUNNER, Change("RESYNC", runner))
    second = build_event(EPHEMERAL_RUNNER, Change("RESYNC", runner))
    assert msg_id(first) != msg_id(second)


def test_secret_event_carries_no_data() -> None:
    secret = manifest(
        "jit-config", "5", labels={"app.kubernetes.io/part-of": "gha-runner-scale-set"}
    )
    secret["data"] = {"jitToken": "c3VwZXItc2VjcmV0LWppdA=="}
    secret["stringData"] = {"token": "ghs_abcdefghijklmnop1234"}
    secret["metadata"]["annotations"] = {"last-applied": "c3VwZXItc2VjcmV0LWppdA=="}
    event = build_event(SECRET, Change("ADDED", summarize(secret)))
    wire = event.model_dump_json()
    assert "c3VwZXItc2VjcmV0LWppdA==" not in wire
    assert "ghs_" not in wire
    assert "jitToken" not in wire


# --- resume points --------------------------------------------------------------------------


def test_resume_point_round_trip() -> None:
    cache = KindCache.empty()
    cache.apply(Change("ADDED", obj("a", "1", labels={"x": "y"}, generation=2)))
    cache.apply(Change("ADDED", obj("b", "2")))
    cache.resource_version = "2"
    data = ResumePoint.of(cache).encode()
    restored = ResumePoint.decode(data).to_cache()
    assert restored.objects == cache.objects
    assert restored.resource_version == "2"


def test_resume_point_compresses_repetitive_labels() -> None:
    labels = {f"actions.github.com/label-{i}": "gha-runner-scale-set" for i in range(6)}
    cache = KindCache.empty()
    for i in range(200):
        cache.apply(Change("ADDED", obj(f"runner-{i}", str(i), labels=labels)))
    point = ResumePoint.of(cache)
    assert len(point.encode()) * 4 < len(point.model_dump_json())


@pytest.mark.parametrize("data", [b"", b"not zlib", __import__("zlib").compress(b'{"objects": 5}')])
def test_resume_point_decode_rejects_garbage(data: bytes) -> None:
    with pytest.raises(ValueError, match="resume point"):
        ResumePoint.decode(data)


def test_resume_keys_per_scope() -> None:
    assert resume_key(POD, None) == "pods._all"
    assert resume_key(POD, "arc-runners") == "pods.arc-runners"


def test_backoff_doubles_to_the_cap_and_resets() -> None:
    from arcflow.watcher.outbox import Backoff

    backoff = Backoff(0.2, 1.0)
    assert [backoff.next_delay() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next_delay() == 0.2
