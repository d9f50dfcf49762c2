"""validate_manifest: schema problems become FieldErrors with paths instead of exceptions."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.validation import FieldError, validate_manifest


def ars(spec: dict[str, Any], name: str = "arc") -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name},
        "spec": {
            "githubConfigUrl": "https://github.com/example-org",
            "githubConfigSecret": "s",
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
    assert validate_manifest(ars({"template": {"spec": {"anything": {"goes": 1}}}})) == []


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
