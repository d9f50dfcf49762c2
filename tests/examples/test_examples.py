"""Every example in examples/ does what examples/README.md promises, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli
from arcflow.common.constants import KIND_AL, KIND_ERS
from arcflow.common.models import AutoscalingRunnerSet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NUMBERED = sorted(EXAMPLES.glob("[0-9][0-9]-*.yaml"))


def test_numbered_examples_exist_and_are_listed_in_the_readme() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert [p.name for p in NUMBERED] == [
        "01-single-scale-set.yaml",
        "02-runner-variants.yaml",
        "03-shared-capacity.yaml",
        "04-scheduled-minimums.yaml",
    ]
    for path in NUMBERED:
        assert path.name in readme


@pytest.mark.parametrize("path", NUMBERED, ids=lambda p: p.name)
def test_numbered_example_validates_and_plans_one_ers_per_variant(path: Path) -> None:
    runner = CliRunner()
    validated = runner.invoke(cli, ["validate", str(path)])
    assert validated.exit_code == 0, validated.output

    planned = runner.invoke(cli, ["plan", str(path), "-o", "yaml"])
    assert planned.exit_code == 0, planned.output
    docs = [d for d in yaml.safe_load_all(planned.stdout) if d]
    ars = AutoscalingRunnerSet.from_manifest(yaml.safe_load(path.read_text()))
    variants = ars.spec.effective_variants()
    assert sum(d["kind"] == KIND_ERS for d in docs) == len(variants)
    assert sum(d["kind"] == KIND_AL for d in docs) == 1


def test_consolidate_examples_merge_into_one_variant_set() -> None:
    files = sorted(str(p) for p in (EXAMPLES / "consolidate").glob("ars-*.yaml"))
    result = CliRunner().invoke(cli, ["consolidate", *files, "-o", "yaml"])
    assert result.exit_code == 0, result.output
    merged = yaml.safe_load(result.stdout)
    assert [v["name"] for v in merged["spec"]["runnerVariants"]] == ["gpu", "large", "small"]
