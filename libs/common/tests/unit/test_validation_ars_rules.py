"""Every AutoscalingRunnerSet rule: a bad input, the exact path, and a message that explains."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.validation import FieldError, validate_autoscaling_runner_set

VALID: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "AutoscalingRunnerSet",
    "metadata": {"name": "arc", "namespace": "arc-runners"},
    "spec": {
        "githubConfigUrl": "https://github.com/example-org",
        "githubConfigSecret": "arc-github-secret",
        "minRunners": 1,
        "maxRunners": 5,
        "runnerScaleSetLabels": ["linux"],
        "template": {"spec": {"containers": [{"name": "runner"}]}},
        "runnerVariants": [
            {"name": "cpu", "runnerScaleSetLabels": ["cpu"]},
            {"name": "gpu", "maxRunners": 2},
        ],
    },
}


def errors_for(**changes: Any) -> list[FieldError]:
    """Validate VALID with dotted-path changes applied (value None deletes the key)."""
    doc = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return validate_autoscaling_runner_set(AutoscalingRunnerSet.from_manifest(doc))


def paths(errors: list[FieldError]) -> list[str]:
    return [e.path for e in errors]


def test_valid_manifest_has_no_errors() -> None:
    assert errors_for() == []


def test_field_error_str() -> None:
    assert str(FieldError("spec.x", "is wrong")) == "spec.x: is wrong"


def test_name_required() -> None:
    errors = errors_for(metadata__name=None)
    assert paths(errors) == ["metadata.name"]
    assert "required" in errors[0].message


def test_ars_name_at_most_45() -> None:
    errors = errors_for(metadata__name="a" * 46)
    assert "metadata.name" in paths(errors)
    assert "at most 45" in errors[0].message
    assert errors_for(metadata__name="a" * 45, spec__runnerVariants=None) == []


def test_runner_scale_set_name_at_most_45() -> None:
    errors = errors_for(spec__runnerScaleSetName="s" * 46)
    assert paths(errors) == ["spec.runnerScaleSetName"]
    assert "46 characters" in errors[0].message
    assert "45" in errors[0].message


def test_github_config_url_required() -> None:
    errors = errors_for(spec__githubConfigUrl=None)
    assert paths(errors) == ["spec.githubConfigUrl"]
    assert "required" in errors[0].message


@pytest.mark.parametrize(
    "url",
    ["github.com/example-org", "https://github.com", "https://github.com/a/b/c", "ftp://x/y"],
)
def test_github_config_url_must_parse(url: str) -> None:
    errors = errors_for(spec__githubConfigUrl=url)
    assert paths(errors) == ["spec.githubConfigUrl"]
    assert "enterprises/<enterprise>" in errors[0].message


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/example-org/",
        "https://github.com/example-org/repo",
        "https://github.com/enterprises/ent",
        "https://ghes.example.com/enterprises/ent",
        "https://tenant.ghe.com/org",
    ],
)
def test_github_config_url_accepted_scopes(url: str) -> None:
    assert errors_for(spec__githubConfigUrl=url) == []


def test_github_config_secret_required() -> None:
    assert paths(errors_for(spec__githubConfigSecret="")) == ["spec.githubConfigSecret"]


def test_vault_type_must_be_azure_key_vault() -> None:
    errors = errors_for(spec__vaultConfig={"type": "hashicorp"})
    assert paths(errors) == ["spec.vaultConfig.type"]
    assert "azure_key_vault" in errors[0].message
    assert errors_for(spec__vaultConfig={"type": "azure_key_vault"}) == []
    assert errors_for(spec__vaultConfig={}) == []


def test_top_level_min_greater_than_max() -> None:
    errors = errors_for(spec__minRunners=6, spec__runnerVariants=None)
    assert paths(errors) == ["spec.maxRunners"]
    assert "greater than or equal to minRunners" in errors[0].message


def test_top_level_negative_counts() -> None:
    errors = errors_for(spec__minRunners=-1, spec__maxRunners=-2, spec__runnerVariants=None)
    assert paths(errors) == ["spec.minRunners", "spec.maxRunners"]
    assert all("greater than or equal to 0" in e.message for e in errors)


def test_variant_negative_counts() -> None:
    errors = errors_for(
        spec__runnerVariants__0__minRunners=-1, spec__runnerVariants__1__maxRunners=-3
    )
    assert "spec.runnerVariants[0].minRunners" in paths(errors)
    assert "spec.runnerVariants[1].maxRunners" in paths(errors)


def test_variant_min_greater_than_own_max() -> None:
    errors = errors_for(spec__runnerVariants__1__minRunners=3)
    assert paths(errors) == ["spec.runnerVariants[1].maxRunners"]
    assert "minRunners (3)" in errors[0].message
    assert "maxRunners (2)" in errors[0].message


def test_variant_min_greater_than_inherited_max() -> None:
    """maxRunners inherited from the ARS counts; the error points at the field the variant set."""
    errors = errors_for(spec__runnerVariants__0__minRunners=9)
    assert paths(errors) == ["spec.runnerVariants[0].minRunners"]
    assert "inherited from spec.maxRunners" in errors[0].message


def test_variant_max_below_inherited_min() -> None:
    errors = errors_for(spec__minRunners=3, spec__runnerVariants__1__maxRunners=1)
    assert paths(errors) == ["spec.runnerVariants[1].maxRunners"]
    assert "inherited from spec.minRunners" in errors[0].message


def test_variant_without_any_max_is_unbounded_so_any_min_is_fine() -> None:
    assert errors_for(spec__maxRunners=None, spec__runnerVariants__0__minRunners=100) == []


def test_variant_name_required() -> None:
    errors = errors_for(spec__runnerVariants__1__name=None)
    assert paths(errors) == ["spec.runnerVariants[1].name"]
    assert "required" in errors[0].message


@pytest.mark.parametrize("name", ["GPU", "gpu_1", "-gpu", "gpu-", "g.pu", "gpu large"])
def test_variant_name_must_be_dns_label(name: str) -> None:
    errors = errors_for(spec__runnerVariants__1__name=name)
    assert paths(errors) == ["spec.runnerVariants[1].name"]
    assert "DNS label" in errors[0].message


def test_variant_names_unique() -> None:
    errors = errors_for(spec__runnerVariants__1__name="cpu")
    assert paths(errors) == ["spec.runnerVariants[1].name"]
    assert "spec.runnerVariants[0]" in errors[0].message
    assert "unique" in errors[0].message


def test_variant_ephemeral_runner_set_name_at_most_63() -> None:
    ars_name = "a" * 40
    fits = "v" * (63 - len(ars_name) - 1)
    assert errors_for(metadata__name=ars_name, spec__runnerVariants__1__name=fits) == []
    errors = errors_for(metadata__name=ars_name, spec__runnerVariants__1__name=fits + "x")
    assert paths(errors) == ["spec.runnerVariants[1].name"]
    assert "longer" in errors[0].message or "more than 63" in errors[0].message


def test_variant_scale_set_name_over_128() -> None:
    """Only reachable with an over-long base name; the variant error is reported too."""
    errors = errors_for(
        metadata__name="a",
        spec__runnerScaleSetName="s" * 100,
        spec__runnerVariants__1__name="v" * 40,
    )
    assert paths(errors) == ["spec.runnerScaleSetName", "spec.runnerVariants[1].name"]
    assert "128" in errors[1].message


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"spec__runnerScaleSetLabels": ["ok", ""]}, "spec.runnerScaleSetLabels[1]"),
        ({"spec__runnerScaleSetLabels": ["x" * 256]}, "spec.runnerScaleSetLabels[0]"),
        (
            {"spec__runnerVariants__0__runnerScaleSetLabels": [""]},
            "spec.runnerVariants[0].runnerScaleSetLabels[0]",
        ),
        (
            {"spec__runnerVariants__0__runnerScaleSetLabels": ["a", "b" * 300]},
            "spec.runnerVariants[0].runnerScaleSetLabels[1]",
        ),
    ],
)
def test_scale_set_labels_non_empty_and_shorter_than_256(change: dict[str, Any], path: str) -> None:
    errors = errors_for(**change)
    assert paths(errors) == [path]
    assert "less than 256 characters" in errors[0].message


def test_label_of_255_characters_is_fine() -> None:
    assert errors_for(spec__runnerScaleSetLabels=["x" * 255]) == []


def test_all_errors_are_collected() -> None:
    errors = errors_for(
        metadata__name=None,
        spec__githubConfigUrl="nope",
        spec__githubConfigSecret=None,
        spec__minRunners=9,
        spec__runnerVariants=[{"name": "A"}, {"name": ""}, {"name": "ok", "minRunners": -1}],
    )
    assert paths(errors) == [
        "metadata.name",
        "spec.githubConfigUrl",
        "spec.githubConfigSecret",
        "spec.maxRunners",
        "spec.runnerVariants[0].name",
        "spec.runnerVariants[1].name",
        "spec.runnerVariants[2].minRunners",
    ]


def test_example_manifests_are_valid() -> None:
    from pathlib import Path

    import yaml

    examples = Path(__file__).parents[4] / "examples"
    for name in ("01-single-scale-set.yaml", "02-runner-variants.yaml"):
        doc = yaml.safe_load((examples / name).read_text())
        assert validate_autoscaling_runner_set(AutoscalingRunnerSet.from_manifest(doc)) == []
