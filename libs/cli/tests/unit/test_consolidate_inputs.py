"""``arcflow consolidate`` inputs as ARC users have them: ``helm template`` output, values files
named by their release, chart values out (``-o values``), and mixed inputs refused."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "consolidate"
ARS_FILES = sorted(EXAMPLES.glob("ars-*.yaml"))
VALUES_FILES = sorted(EXAMPLES.glob("values-*.yaml"))
SERVICE_ACCOUNT = {
    "apiVersion": "v1",
    "kind": "ServiceAccount",
    "metadata": {"name": "arc-runners-gpu-gha-rs-no-permission", "namespace": "arc-runners"},
}


def _run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["consolidate", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_helm_template_output_on_stdin_skips_other_kinds() -> None:
    rendered = []
    for path in ARS_FILES:  # what `helm template` of each release prints, concatenated
        rendered.append(
            "# Source: gha-runner-scale-set/templates/no_permission_serviceaccount.yaml"
        )
        rendered.append(yaml.safe_dump(SERVICE_ACCOUNT))
        rendered.append("---\n" + path.read_text())
    code, out, err = _run("-", stdin="---\n".join(rendered))
    assert code == 0, err
    merged = yaml.safe_load(out)
    assert [v["name"] for v in merged["spec"]["runnerVariants"]] == ["gpu", "large", "small"]
    assert err.count("skipped ServiceAccount arc-runners-gpu-gha-rs-no-permission") == 3


def _values_without_name(tmp_path: Path) -> list[str]:
    args = []
    for path in VALUES_FILES:
        values = yaml.safe_load(path.read_text())
        release = values.pop("runnerScaleSetName")  # the chart then uses the release name
        copy = tmp_path / f"{path.stem}.yaml"
        copy.write_text(yaml.safe_dump(values))
        args.append(f"{release}={copy}")
    return args


def test_release_names_name_values_files(tmp_path: Path) -> None:
    code, out, err = _run(*_values_without_name(tmp_path))
    assert code == 0, err
    merged = yaml.safe_load(out)
    assert merged["metadata"]["name"] == "arc-runners"
    assert [v["name"] for v in merged["spec"]["runnerVariants"]] == ["gpu", "large", "small"]


def test_values_out_for_the_arcflow_runner_set_chart(tmp_path: Path) -> None:
    args = _values_without_name(tmp_path)
    code, out, err = _run(*args, "-o", "values")
    assert code == 0, err
    values = yaml.safe_load(out)
    assert values["runnerScaleSetName"] == "arc-runners"
    assert values["githubConfigUrl"] == "https://github.com/example-org"
    assert [v["name"] for v in values["runnerVariants"]] == ["gpu", "large", "small"]
    assert values["runnerVariants"][0]["maxRunners"] == 2
    assert "kind" not in values
    assert "apiVersion" not in values
    assert "note: install: helm install arc-runners deploy/helm/arcflow-runner-set" in err
    # A credentials map keeps its keys only.
    for path in tmp_path.glob("values-*.yaml"):
        data = yaml.safe_load(path.read_text())
        data["githubConfigSecret"] = {"github_token": "ghp_very_secret_value"}
        path.write_text(yaml.safe_dump(data))
    code, out, err = _run(*args, "-o", "values")
    assert code == 0, err
    assert "ghp_very_secret_value" not in out + err
    assert yaml.safe_load(out)["githubConfigSecret"] == {"github_token": "<fill in>"}


def test_mixing_manifests_and_values_is_refused() -> None:
    code, out, err = _run(str(ARS_FILES[0]), str(VALUES_FILES[1]))
    assert code == 1
    assert out == ""
    assert "you mixed manifests and values files" in err
    assert str(ARS_FILES[0]) in err
    assert str(VALUES_FILES[1]) in err


def test_a_release_name_on_a_manifest_is_refused() -> None:
    code, _, err = _run(f"gpu={ARS_FILES[0]}", str(ARS_FILES[1]))
    assert code == 1
    assert "a release name goes with a values file" in err
