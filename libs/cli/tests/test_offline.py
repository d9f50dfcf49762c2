"""``arcflow validate`` and ``arcflow plan`` through click's CliRunner (the real command group)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from arcflow.cli.main import cli

TWO_VARIANTS = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata:
  name: fleet
  namespace: ci
  labels:
    app.kubernetes.io/version: "0.14.2"
spec:
  githubConfigUrl: https://github.com/acme
  githubConfigSecret: github-auth
  template:
    spec:
      containers:
        - name: runner
          image: ghcr.io/actions/actions-runner:2.330.0
  runnerVariants:
    - name: cpu
      runnerScaleSetLabels: [self-hosted-cpu]
      maxRunners: 10
    - name: gpu
      runnerScaleSetLabels: [self-hosted-gpu]
      template:
        spec:
          containers:
            - name: runner
              image: ghcr.io/acme/gpu-runner:1.0
"""

BAD = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata:
  name: fleet
  namespace: ci
spec:
  githubConfigUrl: https://github.com/acme
  githubConfigSecret: github-auth
  minRunners: 5
  maxRunners: 2
  template:
    spec:
      containers:
        - name: runner
          image: ghcr.io/actions/actions-runner:latest
  runnerVariants:
    - name: Bad_Name
    - name: cpu
    - name: cpu
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _write(tmp_path: Path, text: str, name: str = "ars.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_plan_two_variants_yaml(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, TWO_VARIANTS))])
    assert result.exit_code == 0, result.output
    assert "placeholder scale set ids (cpu=1, gpu=2)" in result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    runner_sets = _kinds(docs, "EphemeralRunnerSet")
    assert [d["metadata"]["name"] for d in runner_sets] == ["fleet-cpu", "fleet-gpu"]
    assert [d["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] for d in runner_sets] == [1, 2]
    (listener,) = _kinds(docs, "AutoscalingListener")
    assert listener["metadata"]["namespace"] == "arc-systems"
    tuples = json.loads(
        listener["metadata"]["annotations"]["actions.github.com/listener-scale-sets"]
    )
    assert [(t["variantName"], t["ephemeralRunnerSetName"]) for t in tuples] == [
        ("cpu", "fleet-cpu"),
        ("gpu", "fleet-gpu"),
    ]
    (role,) = _kinds(docs, "Role")
    assert role["rules"][0]["resourceNames"] == ["fleet-cpu", "fleet-gpu"]
    (secret,) = _kinds(docs, "Secret")
    assert "data" not in secret
    config = json.loads(secret["stringData"]["config.json"])
    assert config["github_token"] == "<redacted>"
    assert [s["runner_scale_set_id"] for s in config["scale_sets"]] == [1, 2]
    assert len(_kinds(docs, "Pod")) == 1


def test_plan_with_ids_json_and_options(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "plan",
            str(_write(tmp_path, TWO_VARIANTS)),
            "--ids",
            "cpu=11,gpu=12",
            "--controller-namespace",
            "arcflow-system",
            "--listener-image",
            "registry.example/listener:9",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "placeholder" not in result.stderr
    docs = json.loads(result.stdout)
    assert [d["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] for d in docs[:2]] == [11, 12]
    (listener,) = _kinds(docs, "AutoscalingListener")
    assert listener["metadata"]["namespace"] == "arcflow-system"
    assert listener["spec"]["image"] == "registry.example/listener:9"
    (pod,) = _kinds(docs, "Pod")
    assert pod["spec"]["containers"][0]["image"] == "registry.example/listener:9"


def test_plan_rejects_incomplete_or_bad_ids(runner: CliRunner, tmp_path: Path) -> None:
    path = str(_write(tmp_path, TWO_VARIANTS))
    missing = runner.invoke(cli, ["plan", path, "--ids", "cpu=11"])
    assert missing.exit_code == 1
    assert "--ids has no id for: gpu" in missing.stderr
    bad = runner.invoke(cli, ["plan", path, "--ids", "cpu=x"])
    assert bad.exit_code == 2
    assert "the id must be an integer" in bad.stderr


def test_plan_without_variants_uses_default_id(runner: CliRunner, tmp_path: Path) -> None:
    single = TWO_VARIANTS.split("  runnerVariants:")[0]
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, single)), "--ids", "42"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    (ers,) = _kinds(docs, "EphemeralRunnerSet")
    assert ers["metadata"]["name"] == "fleet"
    assert ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == 42
    (listener,) = _kinds(docs, "AutoscalingListener")
    assert "actions.github.com/listener-scale-sets" not in listener["metadata"]["annotations"]
    (secret,) = _kinds(docs, "Secret")
    assert "scale_sets" not in json.loads(secret["stringData"]["config.json"])


def test_plan_never_prints_a_credential(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, TWO_VARIANTS))])
    assert result.exit_code == 0
    assert "<redacted>" in result.stdout
    for secret_marker in ("ghp_", "BEGIN RSA", "github_pat_"):
        assert secret_marker not in result.output


def test_plan_stops_on_validation_errors(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, BAD))])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "spec.runnerVariants[0].name" in result.stderr


def test_validate_bad_file_prints_each_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["validate", str(_write(tmp_path, BAD))])
    assert result.exit_code == 1
    lines = result.stdout.strip().splitlines()
    # one "path: message" line per error (wording belongs to arcflow.common.validation)
    paths = sorted(line.split(": ", 1)[0] for line in lines)
    assert paths == [
        "spec.maxRunners",
        "spec.runnerVariants[0].name",
        "spec.runnerVariants[2].name",
    ]
    assert any("Bad_Name" in line for line in lines)


def test_validate_good_file(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["validate", str(_write(tmp_path, TWO_VARIANTS))])
    assert result.exit_code == 0
    assert result.stdout.strip() == "valid"


def test_validate_unreadable_yaml_and_missing_file(runner: CliRunner, tmp_path: Path) -> None:
    broken = runner.invoke(cli, ["validate", str(_write(tmp_path, "spec: [\n"))])
    assert broken.exit_code == 1
    assert "not valid YAML" in broken.stderr
    missing = runner.invoke(cli, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1
    assert "cannot read file" in missing.stderr
    empty = runner.invoke(cli, ["validate", str(_write(tmp_path, "", "empty.yaml"))])
    assert empty.exit_code == 1
    assert "contains no YAML document" in empty.stderr


def test_plan_uses_annotation_ids_and_defaults_namespace(runner: CliRunner, tmp_path: Path) -> None:
    doc = yaml.safe_load(TWO_VARIANTS)
    del doc["metadata"]["namespace"]
    doc["metadata"]["annotations"] = {
        "actions.github.com/runner-scale-set-ids": '{"cpu":21,"gpu":22}'
    }
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, yaml.safe_dump(doc)))])
    assert result.exit_code == 0, result.output
    assert "using scale set ids from its annotations (cpu=21, gpu=22)" in result.stderr
    assert "planning for 'default'" in result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    runner_sets = _kinds(docs, "EphemeralRunnerSet")
    assert [d["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] for d in runner_sets] == [21, 22]
    assert {d["metadata"]["namespace"] for d in runner_sets} == {"default"}


def test_plan_listener_nats_options_reach_the_listener_pod(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The same wiring the reconciler adds: the URL as a value, credentials as references."""
    result = runner.invoke(
        cli,
        [
            "plan",
            str(_write(tmp_path, TWO_VARIANTS)),
            "--listener-nats-url",
            "nats://nats.nats.svc:4222",
            "--listener-nats-secret",
            "listener-nats",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (pod,) = _kinds(json.loads(result.stdout), "Pod")
    env = pod["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == [
        "LISTENER_CONFIG_PATH",
        "ARCFLOW_KUBE_QPS",
        "ARCFLOW_KUBE_BURST",
        "ARCFLOW_NATS_URL",
        "ARCFLOW_NATS_USER",
        "ARCFLOW_NATS_PASSWORD",
    ]
    assert env[3]["value"] == "nats://nats.nats.svc:4222"
    assert env[5] == {
        "name": "ARCFLOW_NATS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "listener-nats", "key": "password"}},
    }


def test_plan_without_listener_nats_url_adds_no_nats_env(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, TWO_VARIANTS)), "-o", "json"])
    assert result.exit_code == 0, result.output
    (pod,) = _kinds(json.loads(result.stdout), "Pod")
    assert "ARCFLOW_NATS" not in json.dumps(pod)


def test_plan_listener_nats_secret_without_url_is_an_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli,
        ["plan", str(_write(tmp_path, TWO_VARIANTS)), "--listener-nats-secret", "listener-nats"],
    )
    assert result.exit_code == 1
    assert "listener_nats_secret needs listener_nats_url" in result.stderr


def _standby(replicas: str) -> str:
    single = TWO_VARIANTS.split("  runnerVariants:")[0]
    return single.replace(
        "  namespace: ci\n",
        "  namespace: ci\n  annotations:\n"
        f'    actions.github.com/listener-replicas: "{replicas}"\n',
        1,
    )


def test_plan_shows_two_listener_pods_for_a_standby_listener(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, _standby("2"))), "--ids", "42"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    (listener,) = _kinds(docs, "AutoscalingListener")
    name = listener["metadata"]["name"]
    assert [p["metadata"]["name"] for p in _kinds(docs, "Pod")] == [name, f"{name}-1"]


def test_plan_refuses_a_bad_listener_replica_count(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["plan", str(_write(tmp_path, _standby("3"))), "--ids", "42"])
    assert result.exit_code != 0
    assert '["actions.github.com/listener-replicas"]: must be 1 or 2' in result.output


def test_validate_names_a_bad_listener_replica_count(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["validate", str(_write(tmp_path, _standby("3")))])
    assert result.exit_code != 0
    assert 'metadata.annotations["actions.github.com/listener-replicas"]' in result.output
    assert "must be 1 or 2, got '3'" in result.output
    ok = runner.invoke(cli, ["validate", str(_write(tmp_path, _standby("2"), "ok.yaml"))])
    assert ok.exit_code == 0, ok.output
