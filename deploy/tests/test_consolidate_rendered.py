"""`arcflow consolidate` of container-mode sets, the way its refusal says: the rendered output
of the real `helm template` (ADR 0039)."""

from __future__ import annotations

from typing import Any

import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli
from arcflow.common.models import AutoscalingRunnerSet

from .helpers import Helm


def _values(name: str, memory: str) -> dict[str, Any]:
    return {
        "githubConfigUrl": "https://github.com/acme",
        "githubConfigSecret": "github-credentials",
        "runnerScaleSetName": name,
        "controllerServiceAccount": {"name": "arcflow-reconciler", "namespace": "arc-system"},
        "containerMode": {
            "type": "kubernetes",
            "kubernetesModeWorkVolumeClaim": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "runner",
                        "image": "ghcr.io/actions/actions-runner:latest",
                        "command": ["/home/runner/run.sh"],
                        "resources": {"limits": {"memory": memory}},
                    }
                ]
            }
        },
    }


def test_rendered_kubernetes_mode_sets_merge_and_name_their_accounts(helm: Helm) -> None:
    values_file = helm.values_file(_values("ci-small", "2Gi"))
    refused = CliRunner().invoke(cli, ["consolidate", str(values_file), str(values_file)])
    assert refused.exit_code == 1
    assert "helm template" in refused.stderr

    rendered = ""
    for name, memory in (("ci-small", "2Gi"), ("ci-large", "8Gi")):
        result = helm.template("arcflow-runner-set", values=_values(name, memory), release=name)
        assert result.returncode == 0, result.stderr
        rendered += result.stdout + "\n---\n"
    merged = CliRunner().invoke(cli, ["consolidate", "-"], input=rendered)
    assert merged.exit_code == 0, merged.stderr

    ars = AutoscalingRunnerSet.from_manifest(yaml.safe_load(merged.stdout))
    variants = {v.name: v for v in ars.spec.runner_variants or []}
    assert set(variants) == {"small", "large"}
    for name, variant in variants.items():
        assert variant.template is not None
        pod = variant.template["spec"]
        runner = next(c for c in pod["containers"] if c["name"] == "runner")
        env = {e["name"] for e in runner.get("env") or []}
        assert "ACTIONS_RUNNER_CONTAINER_HOOKS" in env  # the mode stays in each variant
        assert pod["serviceAccountName"] == f"ci-{name}-gha-rs-kube-mode"
        assert f"ServiceAccount 'ci-{name}-gha-rs-kube-mode'" in merged.stderr
