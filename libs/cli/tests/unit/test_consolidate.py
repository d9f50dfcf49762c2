"""Consolidating single-shape runner scale sets into one ARS with runnerVariants."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from arcflow.cli.consolidation import (
    ConsolidationError,
    consolidate,
    input_from_document,
    variant_names,
)
from arcflow.cli.main import cli
from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.validation import validate_autoscaling_runner_set

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "consolidate"
ARS_FILES = sorted(EXAMPLES.glob("ars-*.yaml"))
VALUES_FILES = sorted(EXAMPLES.glob("values-*.yaml"))


def _ars(
    name: str, *, cpu: str = "1", labels: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/example-org",
        "githubConfigSecret": "gh-secret",
        "template": {"spec": {"containers": [{"name": "runner", "resources": {"cpu": cpu}}]}},
    }
    if labels is not None:
        body["runnerScaleSetLabels"] = labels
    body.update(spec)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": "runners"},
        "spec": body,
    }


def _inputs(*docs: dict[str, Any]) -> list[Any]:
    return [input_from_document(doc, f"in{i}.yaml") for i, doc in enumerate(docs)]


# --- merge --------------------------------------------------------------------------------


def test_merge_makes_one_variant_per_input_with_their_own_fields() -> None:
    result = consolidate(
        _inputs(
            _ars("ci-small", cpu="1", labels=["linux"], minRunners=1, maxRunners=8),
            _ars("ci-large", cpu="8", labels=["linux", "large"], maxRunners=4),
            _ars("ci-gpu", cpu="4", labels=["gpu"], minRunners=0, maxRunners=2),
        )
    )
    ars = result.ars
    assert ars.name == "ci"
    assert ars.namespace == "runners"
    assert result.variant_names == ("small", "large", "gpu")
    assert result.names_stripped
    effective = {v.name: v for v in ars.spec.effective_variants()}
    assert effective["large"].runner_scale_set_labels == ["linux", "large"]
    assert effective["large"].template["spec"]["containers"][0]["resources"] == {"cpu": "8"}
    assert (effective["small"].min_runners, effective["small"].max_runners) == (1, 8)
    assert (effective["large"].min_runners, effective["large"].max_runners) == (0, 4)
    assert effective["gpu"].runner_scale_set_labels == ["gpu"]
    assert validate_autoscaling_runner_set(ars) == []
    # Each variant's pod shape is exactly its input's template.
    for name, cpu in (("small", "1"), ("large", "8"), ("gpu", "4")):
        assert effective[name].template == _ars("x", cpu=cpu)["spec"]["template"]


def test_shared_fields_go_to_the_top_level_once() -> None:
    result = consolidate(
        _inputs(_ars("a-x", labels=["l"], maxRunners=3), _ars("a-y", labels=["l"], maxRunners=3))
    )
    spec = result.ars.to_manifest()["spec"]
    assert spec["runnerScaleSetLabels"] == ["l"]
    assert spec["maxRunners"] == 3
    assert spec["runnerVariants"] == [{"name": "x"}, {"name": "y"}]


def test_savings_are_counted_from_the_builders() -> None:
    docs = [_ars("ci-a", cpu="1"), _ars("ci-b", cpu="2"), _ars("ci-c", cpu="3")]
    result = consolidate(_inputs(*docs))
    settings = BuildSettings("arc-systems", "listener:dev")
    per_input = [
        len(plan_objects(AutoscalingRunnerSet.from_manifest(d), {"": 1}, settings)) for d in docs
    ]
    merged = plan_objects(result.ars, {"a": 1, "b": 2, "c": 3}, settings)
    assert result.savings.objects_per_input == tuple(per_input)
    assert result.savings.objects_after == len(merged)
    assert result.savings.listener_pods_before == 3
    assert result.savings.listener_pods_after == 1
    assert result.savings.objects_before - result.savings.objects_after > 0


def test_variant_names_fall_back_to_full_names() -> None:
    assert variant_names(["arc-cpu", "arc-gpu"]) == (["cpu", "gpu"], "arc", True)
    # The prefix ends at a '-' all names share, never inside a word.
    assert variant_names(["arc-runners", "arc-runners-gpu"])[0] == ["runners", "runners-gpu"]
    assert variant_names(["ci-small", "ci-smaller"])[0] == ["small", "smaller"]
    # A remainder that is not a DNS label keeps the full names.
    assert variant_names(["pool-a.big", "pool-b"]) == (["pool-a.big", "pool-b"], "pool", False)
    assert variant_names(["foo", "bar"]) == (["foo", "bar"], "", False)
    result = consolidate(_inputs(_ars("foo"), _ars("bar", cpu="2")), name="merged")
    assert result.variant_names == ("foo", "bar")
    assert not result.names_stripped
    assert any("full input names" in note for note in result.notes)


def test_chart_values_are_detected_and_converted() -> None:
    values = yaml.safe_load(VALUES_FILES[0].read_text())
    item = input_from_document(values, str(VALUES_FILES[0]))
    assert item.from_chart
    spec = item.manifest["spec"]
    assert spec["githubConfigUrl"] == "https://github.com/example-org"  # trailing / trimmed
    assert spec["runnerScaleSetLabels"] == values["scaleSetLabels"]


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"githubConfigUrl": "https://github.com/other-org"}, "spec.githubConfigUrl"),
        ({"githubConfigSecret": "other-secret"}, "spec.githubConfigSecret"),
        ({"runnerGroup": "gpu-group"}, "spec.runnerGroup"),
        ({"proxy": {"https": {"url": "http://proxy:3128"}}}, "spec.proxy"),
        (
            {
                "githubServerTLS": {
                    "certificateFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}
                }
            },
            "spec.githubServerTLS",
        ),
        ({"vaultConfig": {"type": "azure_key_vault"}}, "spec.vaultConfig"),
        (
            {"listenerTemplate": {"spec": {"containers": [{"name": "listener"}]}}},
            "spec.listenerTemplate",
        ),
    ],
)
def test_refuses_a_difference_outside_the_variant_fields(change: dict[str, Any], path: str) -> None:
    other = _ars("ci-b", cpu="2")
    other["spec"].update(change)
    with pytest.raises(ConsolidationError) as caught:
        consolidate(_inputs(_ars("ci-a"), other))
    message = str(caught.value)
    assert message.startswith(path)
    assert "differs" in message
    assert "in0.yaml" in message
    assert "in1.yaml" in message


def test_refuses_another_namespace_with_both_values() -> None:
    other = _ars("ci-b")
    other["metadata"]["namespace"] = "elsewhere"
    with pytest.raises(
        ConsolidationError, match=r"metadata\.namespace differs.*'runners'.*'elsewhere'"
    ):
        consolidate(_inputs(_ars("ci-a"), other))


def test_credential_maps_are_never_printed() -> None:
    def values(name: str, token: str) -> dict[str, Any]:
        return {
            "githubConfigUrl": "https://github.com/example-org",
            "githubConfigSecret": {"github_token": token},
            "runnerScaleSetName": name,
        }

    with pytest.raises(ConsolidationError) as caught:
        consolidate(_inputs(values("ci-a", "ghp_SECRET_ONE"), values("ci-b", "ghp_SECRET_TWO")))
    message = str(caught.value)
    assert "spec.githubConfigSecret" in message
    assert "SECRET" not in message
    assert "<redacted>" in message
    # The same map everywhere merges; the merged set names the chart's Secret, not the token.
    result = consolidate(_inputs(values("ci-a", "ghp_SAME"), values("ci-b", "ghp_SAME")))
    assert result.ars.spec.github_config_secret == "ci-gha-rs-github-secret"
    assert "ghp_SAME" not in yaml.safe_dump(result.ars.to_manifest())


def test_refuses_inputs_with_variants_chart_container_mode_and_bad_merges() -> None:
    with_variants = _ars("ci-a", runnerVariants=[{"name": "x"}])
    with pytest.raises(ConsolidationError, match="already has runnerVariants"):
        _inputs(with_variants)
    with pytest.raises(ConsolidationError, match="kind is 'ConfigMap'"):
        _inputs({"apiVersion": "v1", "kind": "ConfigMap"})
    with pytest.raises(ConsolidationError, match="at least two"):
        consolidate(_inputs(_ars("ci-a")))
    with pytest.raises(ConsolidationError, match="pass --name"):
        consolidate(_inputs(_ars("alpha"), _ars("beta")))
    # A merged name too long for the listener: refused by the ARS validation.
    long_docs = [_ars("x" * 40 + "-aa"), _ars("x" * 40 + "-bb")]
    with pytest.raises(ConsolidationError, match="does not validate"):
        consolidate(_inputs(*long_docs), name="y" * 50)


@pytest.mark.parametrize("mode", ["dind", "kubernetes", "kubernetes-novolume"])
def test_a_container_mode_values_file_is_refused_with_what_to_run_instead(mode: str) -> None:
    values = {"githubConfigUrl": "https://github.com/o", "containerMode": {"type": mode}}
    with pytest.raises(ConsolidationError) as caught:
        input_from_document(values, "values-gpu.yaml")
    message = str(caught.value)
    assert f"containerMode.type={mode!r} cannot be merged from a values file" in message
    assert "helm template values-gpu deploy/helm/arcflow-runner-set -f values-gpu.yaml" in message
    assert "| arcflow consolidate -" in message
    assert ("ServiceAccount, Role and RoleBinding" in message) is (mode != "dind")


def test_a_container_mode_type_the_chart_ignores_is_no_mode_with_a_note() -> None:
    def values(name: str, mode: str) -> dict[str, Any]:
        return {
            "githubConfigUrl": "https://github.com/o",
            "githubConfigSecret": "gh",
            "runnerScaleSetName": name,
            "containerMode": {"type": mode},
        }

    result = consolidate(_inputs(values("ci-a", "none"), values("ci-b", "")))
    assert [v.name for v in result.ars.spec.runner_variants or []] == ["a", "b"]
    assert any("containerMode.type='none' is not a container mode" in n for n in result.notes)


def test_runner_accounts_of_old_releases_are_named_in_the_notes() -> None:
    def rendered(name: str, account: str, key: str) -> dict[str, Any]:
        doc = _ars(name)
        doc["spec"]["template"]["spec"]["serviceAccountName"] = account
        doc["metadata"]["annotations"] = {f"actions.github.com/cleanup-{key}": account}
        return doc

    result = consolidate(
        _inputs(
            rendered("ci-a", "ci-a-gha-rs-kube-mode", "kubernetes-mode-service-account-name"),
            rendered("ci-b", "ci-b-gha-rs-no-permission", "no-permission-service-account-name"),
        )
    )
    notes = "\n".join(result.notes)
    assert "variant a: runner pods run as ServiceAccount 'ci-a-gha-rs-kube-mode'" in notes
    assert "with its Role and RoleBinding" in notes
    assert "variant b: runner pods run as ServiceAccount 'ci-b-gha-rs-no-permission'" in notes


def test_inputs_are_not_mutated() -> None:
    docs = [_ars("ci-a", labels=["x"]), _ars("ci-b", labels=["y"])]
    before = copy.deepcopy(docs)
    consolidate(_inputs(*docs))
    assert docs == before


# --- the command ----------------------------------------------------------------------------


@pytest.mark.parametrize("files", [ARS_FILES, VALUES_FILES], ids=["manifests", "chart-values"])
def test_cli_merges_the_three_examples(files: list[Path]) -> None:
    assert len(files) == 3
    result = CliRunner().invoke(cli, ["consolidate", *map(str, files)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    merged = yaml.safe_load(result.stdout)
    ars = AutoscalingRunnerSet.from_manifest(merged)
    assert ars.name == "arc-runners"
    assert [v.name for v in ars.spec.effective_variants()] == ["gpu", "large", "small"]
    assert validate_autoscaling_runner_set(ars) == []
    assert "listener pods: 3 -> 1 (saves 2)" in result.stderr
    assert "objects the reconciler writes:" in result.stderr


def test_cli_refusal_names_the_field_and_exits_1(tmp_path: Path) -> None:
    other = yaml.safe_load(ARS_FILES[0].read_text())
    other["metadata"]["name"] = "arc-runners-other"
    other["spec"]["runnerGroup"] = "special"
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(other))
    result = CliRunner().invoke(cli, ["consolidate", str(ARS_FILES[0]), str(path), "-o", "json"])
    assert result.exit_code == 1
    assert "cannot consolidate: spec.runnerGroup differs" in result.stderr
    assert "'default'" in result.stderr
    assert "'special'" in result.stderr
    assert result.stdout == ""


# --- which shape stays at the top level (ADR 0063) -----------------------------------------


def test_the_most_common_shape_is_the_top_level_template() -> None:
    result = consolidate(
        _inputs(
            _ars("ci-gpu", cpu="4"),  # first, but alone in its shape
            _ars("ci-small", cpu="1"),
            _ars("ci-medium", cpu="1", labels=["medium"]),
        )
    )
    manifest = result.ars.to_manifest()
    assert manifest["spec"]["template"] == _ars("x", cpu="1")["spec"]["template"]
    variants = {v["name"]: v for v in manifest["spec"]["runnerVariants"]}
    assert "template" in variants["gpu"]
    assert "template" not in variants["small"]
    assert "template" not in variants["medium"]
    [note] = [n for n in result.notes if "top-level template" in n]
    assert "that of small, medium (2 of 3 inputs)" in note
    assert "gpu carry their own" in note


def test_without_a_most_common_shape_there_is_no_top_level_template() -> None:
    result = consolidate(_inputs(_ars("ci-gpu", cpu="4"), _ars("ci-small", cpu="1")))
    manifest = result.ars.to_manifest()
    assert "template" not in manifest["spec"]
    assert all("template" in v for v in manifest["spec"]["runnerVariants"])
    assert any(n.startswith("no top-level template") for n in result.notes)
    # A variant added later without a template is refused, not silently given the GPU shape.
    manifest["spec"]["runnerVariants"].append({"name": "arm"})
    errors = validate_autoscaling_runner_set(AutoscalingRunnerSet.from_manifest(manifest))
    assert [e.path for e in errors] == ["spec.template"]
    assert "spec.runnerVariants[2] has no template of its own" in errors[0].message


def test_the_example_inputs_keep_no_gpu_template_at_the_top_level() -> None:
    docs = [yaml.safe_load(path.read_text()) for path in ARS_FILES]
    result = consolidate(
        [input_from_document(d, str(p)) for d, p in zip(docs, ARS_FILES, strict=True)]
    )
    gpu = next(d for d in docs if d["metadata"]["name"].endswith("gpu"))
    top = result.ars.to_manifest()["spec"].get("template")
    assert top != gpu["spec"]["template"]
