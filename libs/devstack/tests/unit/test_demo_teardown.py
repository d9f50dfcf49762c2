"""What the teardown counts as the example's objects, and how it names leftovers."""

from __future__ import annotations

from typing import Any

from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.devstack import demo
from arcflow.devstack.demo import SummaryInputs


def _obj(
    kind: str,
    name: str,
    uid: str,
    *,
    namespace: str = "arc-runners",
    owner: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner, "kind": "X", "name": "x"}]
    if labels is not None:
        meta["labels"] = labels
    return {"kind": kind, "metadata": meta}


SCALE_SET_LABELS = {LABEL_SCALE_SET_NAME: "arc-runners", LABEL_SCALE_SET_NAMESPACE: "arc-runners"}

CLUSTER = [
    # listed children first, so only a fixpoint finds them
    _obj("Pod", "runner-1", "pod1", owner="er1"),
    _obj("Secret", "runner-1", "jit1", owner="er1"),
    _obj("EphemeralRunner", "runner-1", "er1", owner="ers1"),
    _obj("EphemeralRunnerSet", "arc-runners-gpu", "ers1", owner="ars"),
    _obj("Pod", "listener", "lpod", namespace="arc-systems", owner="al"),
    _obj("Secret", "listener-config", "lcfg", namespace="arc-systems", owner="al"),
    _obj("AutoscalingListener", "listener", "al", namespace="arc-systems", labels=SCALE_SET_LABELS),
    _obj("AutoscalingRunnerSet", "arc-runners", "ars"),
    # not the example's: the credentials Secret, someone else's pod and listener
    _obj("Secret", "arc-github-secret", "cred"),
    _obj("Pod", "web", "web", namespace="default"),
    _obj(
        "AutoscalingListener",
        "other",
        "al2",
        namespace="arc-systems",
        labels={LABEL_SCALE_SET_NAME: "arc-runners", LABEL_SCALE_SET_NAMESPACE: "elsewhere"},
    ),
]


def test_the_tree_holds_every_descendant_and_nothing_else() -> None:
    tree = demo.grow_demo_tree(
        CLUSTER, {"ars"}, ars_name="arc-runners", ars_namespace="arc-runners"
    )
    assert tree == {"ars", "ers1", "er1", "pod1", "jit1", "al", "lpod", "lcfg"}


def test_an_orphan_stays_recognised_once_its_owner_is_gone() -> None:
    tree = demo.grow_demo_tree(
        CLUSTER, {"ars"}, ars_name="arc-runners", ars_namespace="arc-runners"
    )
    # later: everything finalized except the runner pod, whose ER is gone
    remaining = [CLUSTER[0], CLUSTER[8], CLUSTER[9]]
    tree = demo.grow_demo_tree(remaining, tree, ars_name="arc-runners", ars_namespace="arc-runners")
    assert demo.demo_leftovers(remaining, tree) == ["Pod arc-runners/runner-1"]


def test_leftovers_are_named_kind_namespace_name_sorted() -> None:
    objects = [_obj("Secret", "b", "2"), _obj("AutoscalingListener", "a", "1", namespace="s")]
    assert demo.demo_leftovers(objects, {"1", "2"}) == [
        "AutoscalingListener s/a",
        "Secret arc-runners/b",
    ]
    assert demo.object_ref({"kind": "Namespace", "metadata": {"name": "n"}}) == "Namespace n"
    assert demo.demo_leftovers(objects, set()) == []


def test_summary_reports_the_teardown_and_left_behind_makes_it_not_ok() -> None:
    done = [demo.JobRecord("1", "gpu", 0.0, state="completed", result="succeeded", started_at=1.0)]
    base: dict[str, Any] = {
        "jobs": done,
        "variants": ["gpu"],
        "scale_set_ids": {"gpu": 1},
        "pods_created": {},
        "objects_created": {},
        "components": {},
        "requested_jobs": 1,
    }
    clean = demo.build_summary(SummaryInputs(teardown="removed", **base))
    assert clean["ok"] is True
    assert (clean["teardown"], clean["left_behind"], clean["jobs"]["requested"]) == (
        "removed",
        [],
        1,
    )
    left = demo.build_summary(
        SummaryInputs(
            teardown="incomplete", left_behind=["Pod b/x", "AutoscalingListener a/y"], **base
        )
    )
    assert left["ok"] is False
    assert left["left_behind"] == ["AutoscalingListener a/y", "Pod b/x"]
