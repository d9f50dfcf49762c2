"""The pure lifecycle plan: every variant transition, tested with plain data."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.models import (
    AutoscalingRunnerSet,
    InvalidManifestError,
    ObjectMeta,
    OwnerReference,
)
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.registrar.planning import (
    ActionKind,
    Change,
    ars_of,
    desired_scale_sets,
    github_config_of,
    is_settled,
    live_variants,
    plan_scale_sets,
    registration_of,
    scale_set_labels,
    sessions_say_not_found,
)

URL = "https://github.com/my-org"


def make_ars(
    *,
    name: str = "arc",
    variants: list[dict[str, Any]] | None = None,
    scale_set_name: str = "",
    labels: list[str] | None = None,
    group: str = "",
    deleting: bool = False,
    url: str = URL,
) -> AutoscalingRunnerSet:
    spec: dict[str, Any] = {"githubConfigUrl": url, "githubConfigSecret": "gh"}
    if variants is not None:
        spec["runnerVariants"] = variants
    if scale_set_name:
        spec["runnerScaleSetName"] = scale_set_name
    if labels is not None:
        spec["runnerScaleSetLabels"] = labels
    if group:
        spec["runnerGroup"] = group
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": "u1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return AutoscalingRunnerSet.from_manifest(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": meta,
            "spec": spec,
        }
    )


def record(
    variant: str,
    *,
    name: str,
    labels: list[str] | None = None,
    set_id: int = 7,
    group_id: int = 1,
    group_name: str = "Default",
    announced: bool = True,
    url: str = URL,
) -> ScaleSetRecord:
    return ScaleSetRecord(
        namespace="ns",
        ars="arc",
        variant=variant,
        scale_set_id=set_id,
        scale_set_name=name,
        runner_group_id=group_id,
        runner_group_name=group_name,
        labels=labels if labels is not None else [name],
        github_config_url=url,
        github_config_secret="gh",
        announced=announced,
    )


def kinds(plan: Any) -> dict[str, ActionKind]:
    return {a.variant: a.kind for a in plan.actions}


def test_labels_put_the_name_first_and_drop_duplicates_and_blanks() -> None:
    assert scale_set_labels("arc-gpu", ["gpu", "arc-gpu", " ", "gpu", "linux"]) == (
        "arc-gpu",
        "gpu",
        "linux",
    )


def test_default_variant_uses_scale_set_name_or_ars_name() -> None:
    assert [d.name for d in desired_scale_sets(make_ars())] == ["arc"]
    assert [d.name for d in desired_scale_sets(make_ars(scale_set_name="linux"))] == ["linux"]


def test_named_variants_get_suffixed_names_and_inherited_labels() -> None:
    ars = make_ars(
        scale_set_name="linux",
        labels=["x64"],
        variants=[
            {"name": "small"},
            {"name": "big", "runnerScaleSetLabels": ["big", "x64"]},
            {"name": "bare", "runnerScaleSetLabels": []},
        ],
    )
    desired = desired_scale_sets(ars)
    assert [(d.variant, d.name, d.labels) for d in desired] == [
        ("small", "linux-small", ("linux-small", "x64")),
        ("big", "linux-big", ("linux-big", "big", "x64")),
        ("bare", "linux-bare", ("linux-bare",)),
    ]


def test_new_ars_creates_every_variant_in_declared_order() -> None:
    ars = make_ars(variants=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    plan = plan_scale_sets(ars, {}, set())
    assert [(a.kind, a.variant) for a in plan.actions] == [
        (ActionKind.CREATE, "a"),
        (ActionKind.CREATE, "b"),
        (ActionKind.CREATE, "c"),
    ]
    assert plan.needs_actions_service


def test_adding_a_variant_creates_only_it() -> None:
    ars = make_ars(variants=[{"name": "a"}, {"name": "b"}])
    records = {"a": record("a", name="arc-a")}
    plan = plan_scale_sets(ars, records, {"a"})
    assert kinds(plan) == {"a": ActionKind.KEEP, "b": ActionKind.CREATE}


def test_everything_current_needs_no_service_call() -> None:
    ars = make_ars(variants=[{"name": "a"}])
    plan = plan_scale_sets(ars, {"a": record("a", name="arc-a")}, {"a"})
    assert kinds(plan) == {"a": ActionKind.KEEP}
    assert not plan.needs_actions_service
    assert not plan.actions[0].announce


def test_settled_only_when_a_pass_would_do_nothing() -> None:
    """What the sweep skips (ADR 0120): every wanted variant registered, current and
    announced; anything else (new, changed, unannounced, left over, deleting) is not."""
    ars = make_ars(variants=[{"name": "a"}, {"name": "b"}])
    a, b = record("a", name="arc-a"), record("b", name="arc-b", set_id=8)
    assert is_settled(ars, {"a": a, "b": b})
    assert is_settled(None, {})
    assert not is_settled(ars, {"a": a})
    assert not is_settled(ars, {"a": a, "b": record("b", name="arc-b", announced=False)})
    assert not is_settled(ars, {"a": a, "b": record("b", name="arc-b", labels=["other"])})
    assert not is_settled(make_ars(variants=[{"name": "a"}]), {"a": a, "b": b})
    assert not is_settled(None, {"a": a})
    deleting = make_ars(variants=[{"name": "a"}, {"name": "b"}], deleting=True)
    assert not is_settled(deleting, {"a": a, "b": b})


def test_unannounced_record_is_reannounced() -> None:
    ars = make_ars(variants=[{"name": "a"}])
    plan = plan_scale_sets(ars, {"a": record("a", name="arc-a", announced=False)}, set())
    assert plan.actions[0].kind is ActionKind.KEEP
    assert plan.actions[0].announce


def test_removed_variant_waits_while_its_runner_set_lives() -> None:
    ars = make_ars(variants=[{"name": "a"}])
    records = {"a": record("a", name="arc-a"), "b": record("b", name="arc-b", set_id=8)}
    plan = plan_scale_sets(ars, records, {"a", "b"})
    assert kinds(plan) == {"a": ActionKind.KEEP, "b": ActionKind.WAIT}
    assert plan.pending_deletions
    assert not plan.needs_actions_service


def test_removed_variant_is_deleted_once_its_runner_set_is_gone() -> None:
    ars = make_ars(variants=[{"name": "a"}])
    records = {"a": record("a", name="arc-a"), "b": record("b", name="arc-b", set_id=8)}
    plan = plan_scale_sets(ars, records, {"a"})
    assert kinds(plan) == {"a": ActionKind.KEEP, "b": ActionKind.DELETE}
    delete = plan.of_kind(ActionKind.DELETE)[0]
    assert delete.record is not None
    assert delete.record.scale_set_id == 8
    assert delete.reason == "variant removed"


@pytest.mark.parametrize("gone", [True, False])
def test_deleting_or_gone_ars_deletes_all_after_runner_sets(gone: bool) -> None:
    ars = None if gone else make_ars(variants=[{"name": "a"}, {"name": "b"}], deleting=True)
    records = {"a": record("a", name="arc-a"), "b": record("b", name="arc-b", set_id=8)}
    assert kinds(plan_scale_sets(ars, records, {"b"})) == {
        "a": ActionKind.DELETE,
        "b": ActionKind.WAIT,
    }
    final = plan_scale_sets(ars, records, set())
    assert kinds(final) == {"a": ActionKind.DELETE, "b": ActionKind.DELETE}
    assert all(a.reason == "ARS deleted" for a in final.actions)


def test_deleted_ars_without_records_plans_nothing() -> None:
    assert plan_scale_sets(None, {}, {"x"}).actions == ()


def test_switching_from_single_to_variants_removes_the_default_after_its_ers() -> None:
    ars = make_ars(variants=[{"name": "a"}])
    records = {"": record("", name="arc")}
    assert kinds(plan_scale_sets(ars, records, {""})) == {
        "a": ActionKind.CREATE,
        "": ActionKind.WAIT,
    }
    assert kinds(plan_scale_sets(ars, records, set())) == {
        "a": ActionKind.CREATE,
        "": ActionKind.DELETE,
    }


def test_label_change_is_an_update_and_order_alone_is_not() -> None:
    ars = make_ars(labels=["x", "y"])
    same = record("", name="arc", labels=["arc", "y", "x"])
    assert kinds(plan_scale_sets(ars, {"": same}, set())) == {"": ActionKind.KEEP}
    stale = record("", name="arc", labels=["arc", "x"])
    action = plan_scale_sets(ars, {"": stale}, set()).actions[0]
    assert action.kind is ActionKind.UPDATE
    assert action.changes == (Change.LABELS,)


def test_rename_and_group_change_are_updates() -> None:
    ars = make_ars(scale_set_name="linux", group="gpus")
    old = record("", name="arc", labels=["arc"])
    action = plan_scale_sets(ars, {"": old}, set()).actions[0]
    assert action.kind is ActionKind.UPDATE
    assert set(action.changes) == {Change.NAME, Change.LABELS, Change.RUNNER_GROUP}
    assert action.desired is not None
    assert action.desired.runner_group == "gpus"


def test_group_matching_default_by_id_and_named_case_insensitively() -> None:
    default = make_ars()
    assert kinds(
        plan_scale_sets(default, {"": record("", name="arc", group_name="Whatever")}, set())
    ) == {"": ActionKind.KEEP}
    named = make_ars(group="GPUs")
    in_group = record("", name="arc", group_id=3, group_name="gpus")
    assert kinds(plan_scale_sets(named, {"": in_group}, set())) == {"": ActionKind.KEEP}
    back_to_default = record("", name="arc", group_id=3, group_name="gpus")
    assert plan_scale_sets(default, {"": back_to_default}, set()).actions[0].changes == (
        Change.RUNNER_GROUP,
    )


def test_config_url_change_reregisters() -> None:
    ars = make_ars(url="https://github.com/other-org")
    action = plan_scale_sets(ars, {"": record("", name="arc")}, set()).actions[0]
    assert action.kind is ActionKind.CREATE
    assert Change.CONFIG_URL in action.changes


def test_trailing_slash_in_url_is_not_a_change() -> None:
    ars = make_ars(url=URL + "/")
    assert kinds(plan_scale_sets(ars, {"": record("", name="arc")}, set())) == {"": ActionKind.KEEP}


def _obj(name: str, labels: dict[str, str] | None = None, owner: str | None = None) -> ObjectMeta:
    owners = [OwnerReference(kind="EphemeralRunnerSet", name=owner)] if owner else None
    return ObjectMeta(name=name, labels=labels or {}, owner_references=owners)


def test_live_variants_from_labels_names_and_owners() -> None:
    variant_label = "actions.github.com/runner-variant"
    runner_sets = [_obj("arc-a", {variant_label: "a"}), _obj("arc-b"), _obj("arc")]
    assert live_variants("arc", runner_sets, [], known_variants=["b"]) == {"a", "b", ""}
    runners = [_obj("arc-c-runner-x", owner="arc-c"), _obj("arc-d-runner-y", {variant_label: "d"})]
    assert live_variants("arc", [], runners, known_variants=["c"]) == {"c", "d"}
    assert live_variants("arc", [], [_obj("orphan-runner")]) == {""}
    assert live_variants("arc", [], []) == set()


def _manifest(variants: list[dict[str, Any]], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "arc", "namespace": "ns", **metadata},
        "spec": {
            "githubConfigUrl": URL,
            "githubConfigSecret": "gh",
            "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
            "runnerVariants": variants,
        },
    }


def test_a_valid_ars_is_registered_as_it_is() -> None:
    registration = registration_of(_manifest([{"name": "a"}, {"name": "b"}]))
    assert (registration.namespace, registration.name) == ("ns", "arc")
    assert registration.ars is not None
    assert [d.variant for d in desired_scale_sets(registration.ars)] == ["a", "b"]


def test_an_invalid_ars_is_refused_with_field_paths_and_planned_as_gone_once_deleting() -> None:
    bad = _manifest([{"name": "Not_A_DNS_Label"}])
    with pytest.raises(InvalidManifestError) as refused:
        registration_of(bad)
    assert any(path.startswith("spec.runnerVariants[0]") for path, _ in refused.value.problems)
    deleting = _manifest([{"name": "Not_A_DNS_Label"}], deletionTimestamp="2026-12-01T00:00:00Z")
    assert registration_of(deleting).ars is None


def test_the_github_config_comes_from_the_ars_else_from_a_registration() -> None:
    doc = {"spec": {"githubConfigUrl": URL, "githubConfigSecret": "creds"}}
    ars = ars_of(doc, "ns", "arc")
    spec, url, secret = github_config_of(
        ars, [record("a", name="arc-a", url="https://elsewhere")], "ns", "arc"
    )
    assert (url, secret) == (URL, "creds")
    assert spec is not None
    assert spec.github_config_secret == "creds"
    spec, url, secret = github_config_of(
        ars_of(None, "ns", "arc"),
        [record("a", name="arc-a", url="https://gone.example")],
        "ns",
        "arc",
    )
    assert (spec, url, secret) == (None, "https://gone.example", "gh")
    with pytest.raises(LookupError, match="ns/arc not found"):
        github_config_of(None, [], "ns", "arc")
    with pytest.raises(LookupError, match="has no githubConfigUrl"):
        github_config_of(ars_of({"spec": {}}, "ns", "arc"), [], "ns", "arc")


def test_an_ars_that_does_not_parse_is_a_lookup_error_naming_the_field_not_the_value() -> None:
    with pytest.raises(LookupError, match=r"ns/arc: .*spec.githubConfigUrl") as refused:
        ars_of({"spec": {"githubConfigUrl": ["ghp_not_a_url"]}}, "ns", "arc")
    assert "ghp_not_a_url" not in str(refused.value)


def _with_sessions_condition(status: str, reason: str) -> AutoscalingRunnerSet:
    doc = make_ars().manifest
    doc["status"] = {
        "conditions": [
            {"type": "SpecValid", "status": "True", "reason": "Valid"},
            {"type": "ListenerSessionsOpen", "status": status, "reason": reason},
        ]
    }
    return AutoscalingRunnerSet.from_manifest(doc)


@pytest.mark.parametrize(
    ("status", "reason", "cue"),
    [
        ("False", "ScaleSetNotFound", True),
        ("False", "SessionConflict", False),
        ("True", "ScaleSetNotFound", False),
        ("True", "SessionsOpen", False),
    ],
)
def test_the_sessions_condition_cues_a_check_only_for_a_scale_set_not_found(
    status: str, reason: str, cue: bool
) -> None:
    assert sessions_say_not_found(_with_sessions_condition(status, reason)) is cue


def test_no_condition_or_no_set_is_no_cue() -> None:
    assert sessions_say_not_found(make_ars()) is False
    assert sessions_say_not_found(None) is False
