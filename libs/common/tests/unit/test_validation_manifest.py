"""validate_manifest: schema problems become FieldErrors with paths instead of exceptions."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.validation import FieldError, validate_manifest

RUNNER_TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "runner:latest"}]}}


def ars(spec: dict[str, Any], name: str = "arc") -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name},
        "spec": {
            "githubConfigUrl": "https://github.com/example-org",
            "githubConfigSecret": "s",
            "template": RUNNER_TEMPLATE,
            **spec,
        },
    }


def test_valid_manifest() -> None:
    assert validate_manifest(ars({"maxRunners": 3})) == []


def test_type_errors_are_reported_with_paths() -> None:
    errors = validate_manifest(
        ars(
            {"minRunners": "3", "runnerVariants": [{"name": "a"}, {"name": "b", "maxRunners": 1.5}]}
        )
    )
    assert errors == [
        FieldError("spec.minRunners", "input should be a valid integer, got a string"),
        FieldError(
            "spec.runnerVariants[1].maxRunners", "input should be a valid integer, got a number"
        ),
    ]


def test_list_and_map_type_errors() -> None:
    errors = validate_manifest(ars({"runnerScaleSetLabels": "linux", "template": []}))
    assert [e.path for e in errors] == ["spec.runnerScaleSetLabels", "spec.template"]
    assert errors[0].message.endswith("got a string")
    assert errors[1].message.endswith("got a list")


def test_schema_errors_never_echo_values() -> None:
    token = "ghp_tokenvalue1234567890"
    errors = validate_manifest(ars({"githubConfigSecret": {"github_token": token}}))
    assert errors == [
        FieldError("spec.githubConfigSecret", "input should be a valid string, got a mapping")
    ]
    assert all(token not in str(e) for e in errors)


def test_unknown_spec_fields_are_reported() -> None:
    errors = validate_manifest(
        ars({"minRunner": 1, "runnerVariants": [{"name": "a", "maxRunner": 2}]})
    )
    assert [e.path for e in errors] == ["spec.minRunner", "spec.runnerVariants[0].maxRunner"]
    assert "unknown field" in errors[0].message
    assert "minRunners" in errors[0].message


def test_unknown_fields_inside_pod_templates_are_fine() -> None:
    template = {"spec": {"containers": [{"name": "runner"}], "anything": {"goes": 1}}}
    assert validate_manifest(ars({"template": template})) == []


def test_a_runner_shape_without_a_pod_template_is_invalid() -> None:
    no_template = ars({})
    del no_template["spec"]["template"]
    assert [e.path for e in validate_manifest(no_template)] == ["spec.template"]
    assert "container" in validate_manifest(no_template)[0].message
    assert [e.path for e in validate_manifest(ars({"template": {"spec": {}}}))] == ["spec.template"]
    # Variants: one with a template of its own is fine without a top-level one; one that
    # inherits nothing, or brings an empty template, is not.
    variants = ars(
        {"runnerVariants": [{"name": "own", "template": RUNNER_TEMPLATE}, {"name": "bare"}]}
    )
    del variants["spec"]["template"]
    errors = validate_manifest(variants)
    assert [e.path for e in errors] == ["spec.template"]
    assert "spec.runnerVariants[1]" in errors[0].message
    empty = ars({"runnerVariants": [{"name": "x", "template": {"spec": {"containers": []}}}]})
    assert [e.path for e in validate_manifest(empty)] == ["spec.runnerVariants[0].template"]


def test_semantic_rules_run_after_schema() -> None:
    errors = validate_manifest(ars({"runnerVariants": [{"name": "Bad"}]}))
    assert [e.path for e in errors] == ["spec.runnerVariants[0].name"]


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ([], ""),
        ({"kind": "Pod"}, "kind"),
        ({}, "kind"),
        ({"kind": "AutoscalingRunnerSet", "apiVersion": "v1"}, "apiVersion"),
    ],
)
def test_wrong_kind_or_document(doc: Any, path: str) -> None:
    errors = validate_manifest(doc)
    assert errors[0].path == path


def test_other_kinds_get_schema_validation() -> None:
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "spec": {"replicas": "two", "patchID": 1},
    }
    assert validate_manifest(doc) == [
        FieldError("spec.replicas", "input should be a valid integer, got a string")
    ]
    doc["spec"] = {"replicas": 2, "patchID": 1}
    assert validate_manifest(doc) == []
