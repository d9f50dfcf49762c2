"""``arcflow consolidate -o values`` renders with the real arcflow-runner-set chart, and what it
renders passes ``arcflow validate -``: the path an ARC user takes from several upstream releases
to one release of the chart."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli
from deploy.tests.helpers import REPO_ROOT, Helm

pytestmark = pytest.mark.integration

VALUES_FILES = sorted((REPO_ROOT / "examples" / "consolidate").glob("values-*.yaml"))


def test_consolidated_values_render_one_ars_with_the_variants(helm: Helm) -> None:
    merged = CliRunner().invoke(cli, ["consolidate", *map(str, VALUES_FILES), "-o", "values"])
    assert merged.exit_code == 0, merged.stderr
    values = yaml.safe_load(merged.stdout)
    values["controllerServiceAccount"] = {"name": "arcflow-reconciler", "namespace": "arc-systems"}
    result = helm.template(
        "arcflow-runner-set", values=values, release="whatever", namespace="arc-runners"
    )
    assert result.returncode == 0, result.stderr
    sets = [d for d in result.documents() if d["kind"] == "AutoscalingRunnerSet"]
    assert len(sets) == 1
    # runnerScaleSetName is pinned, so the release name does not rename the set.
    assert sets[0]["metadata"]["name"] == "arc-runners"
    assert [v["name"] for v in sets[0]["spec"]["runnerVariants"]] == ["gpu", "large", "small"]
    checked = CliRunner().invoke(cli, ["validate", "-"], input=result.stdout)
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "valid"
    assert "skipped RoleBinding" in checked.stderr
