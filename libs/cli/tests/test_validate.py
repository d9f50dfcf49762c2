"""``arcflow validate`` as a user runs it: several files, stdin, other kinds skipped, "did you
mean", pod templates against the Kubernetes schema, DNS names, YAML errors with a line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from arcflow.cli.main import cli

ARS = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata:
  name: fleet
  namespace: ci
spec:
  githubConfigUrl: https://github.com/acme
  githubConfigSecret: github-auth
  template:
    spec:
      containers:
        - name: runner
          image: ghcr.io/actions/actions-runner:latest
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller
  namespace: arc-systems
spec: {}
"""


def _run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["validate", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_helm_template_output_on_stdin_skips_other_kinds() -> None:
    code, out, err = _run("-", stdin=f"---\n{DEPLOYMENT}---\n{ARS}")
    assert code == 0, out + err
    assert out.strip() == "valid"
    assert "note: [document 0]: skipped Deployment arc-systems/controller" in err


def test_several_files_name_the_file_of_each_problem(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.yaml", ARS)
    bad = _write(tmp_path, "bad.yaml", ARS.replace("name: fleet", "name: Fleet_1"))
    code, out, _ = _run(good, bad)
    assert code == 1
    assert out.strip().splitlines() == [
        f"{bad}: metadata.name: 'Fleet_1' is not a valid name: use lower case letters, "
        "digits, '-' and '.', starting and ending with a letter or digit (RFC 1123 subdomain)"
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("spec:\n  github", "spex:\n  github", "spex: unknown field; did you mean 'spec'?"),
        ("  namespace: ci", "  namespase: ci", "metadata.namespase: unknown field; did you mean "
         "'namespace'?"),
        ("  githubConfigSecret", "  githubConfigSecrett",
         "spec.githubConfigSecrett: unknown field; did you mean 'githubConfigSecret'?"),
        ("          image:", "          imagee:", "spec.template.spec.containers[0].imagee: "
         "unknown field; did you mean 'image'?"),
        ("        - name: runner\n", "        - nam: runner\n",
         "spec.template.spec.containers[0]: 'name' is required"),
        ("  namespace: ci", "  namespace: CI", "metadata.namespace: 'CI' is not a valid "
         "namespace"),
    ],
)  # fmt: skip
def test_typos_get_a_suggestion(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in ARS
    code, out, _ = _run(_write(tmp_path, "ars.yaml", ARS.replace(old, new)))
    assert code == 1
    assert any(line.startswith(expected) for line in out.splitlines()), out


def test_a_variant_template_is_checked_too(tmp_path: Path) -> None:
    text = ARS + (
        "  runnerVariants:\n"
        "    - name: gpu\n"
        "      template:\n"
        "        spec:\n"
        "          containers:\n"
        "            - name: runner\n"
        "              image: x\n"
        "              resources: {limitz: {}}\n"
    )
    code, out, _ = _run(_write(tmp_path, "ars.yaml", text))
    assert code == 1
    assert out.strip() == (
        "spec.runnerVariants[0].template.spec.containers[0].resources.limitz: unknown field; "
        "did you mean 'limits'?"
    )


def test_a_list_is_read_as_its_items(tmp_path: Path) -> None:
    items = "".join(
        "  - " + "\n    ".join(doc.rstrip("\n").splitlines()) + "\n"
        for doc in (ARS, ARS.replace("name: fleet", "name: other"), DEPLOYMENT)
    )
    code, out, err = _run(
        _write(tmp_path, "list.yaml", f"apiVersion: v1\nkind: List\nitems:\n{items}")
    )
    assert code == 0, out + err
    assert out.strip() == "valid (2 documents)"
    assert "skipped Deployment" in err


def test_yaml_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.yaml", ARS.replace("  namespace: ci\n", "  namespace: [ci\n"))
    code, _, err = _run(path)
    assert code == 1
    assert f"Error: {path}:6:" in err
    assert "not valid YAML" in err


def test_nothing_to_validate_is_an_error() -> None:
    code, _, err = _run("-", stdin=DEPLOYMENT)
    assert code == 1
    assert "no arcflow document in the input" in err
