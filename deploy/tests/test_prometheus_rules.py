"""The chart's PrometheusRule checked by Prometheus' own tool (ADR 0068): ``promtool check
rules`` on its groups as a rule file, and ``promtool test rules`` evaluating the stuck-pod and
job-start alerts over given series with Prometheus' rule engine (its ``for`` and range functions,
with no shortcut of ours). The alert firing on a real scrape is
``tests/chaos/test_runner_stalls.py``'s."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.tests.helpers import HELM_DIR, ensure_helm
from tests.fixtures.prometheus import alert_expressions, rendered_monitoring, write_rule_file

pytestmark = pytest.mark.integration

REAPED = (
    'arcflow_reconciler_runner_pods_reaped_total{{namespace="runners",name="ars-{variant}",'
    'variant="{variant}",stage="ImagePull",reason="ImagePullBackOff"}}'
)


def _rule_file(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The rule file, and each alert's description."""
    _, rule = rendered_monitoring(ensure_helm(), HELM_DIR / "arcflow", tmp_path)
    assert "ArcflowRunnerPodStuck" in alert_expressions(rule)
    described = {
        r["alert"]: r["annotations"]["description"]
        for g in rule["spec"]["groups"]
        for r in g["rules"]
    }
    return write_rule_file(rule, tmp_path / "arcflow-rules.yml"), described


def _promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def test_promtool_accepts_the_rendered_rules(tmp_path: Path, promtool: Path) -> None:
    rules, _ = _rule_file(tmp_path)
    done = _promtool(promtool, "check", "rules", str(rules), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout, done.stdout


def test_the_stuck_pod_and_job_start_alerts_on_prometheus_rule_engine(
    tmp_path: Path, promtool: Path
) -> None:
    """gpu's reaped counter rises (its series appears at the first reap, at 1), small's stays
    flat: only gpu's alert fires, and only while the counter rose within 15 min. A job assigned
    and not started fires after the default 10 min threshold, not before."""
    rules, described = _rule_file(tmp_path)
    assigned = 'gha_assigned_jobs{namespace="runners",name="ars-gpu"}'
    running = 'gha_running_jobs{namespace="runners",name="ars-gpu"}'
    stuck_labels = {
        "namespace": "runners",
        "name": "ars-gpu",
        "variant": "gpu",
        "stage": "ImagePull",
        "reason": "ImagePullBackOff",
        "severity": "warning",
    }
    tests = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": REAPED.format(variant="gpu"), "values": "1 2 3 3x30"},
                    {"series": REAPED.format(variant="small"), "values": "4x30"},
                    {"series": assigned, "values": "2x30"},
                    {"series": running, "values": "0x30"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "3m",
                        "alertname": "ArcflowRunnerPodStuck",
                        "exp_alerts": [
                            {
                                "exp_labels": stuck_labels,
                                "exp_annotations": {
                                    "summary": "Runner pods of runners/ars-gpu stuck in "
                                    "ImagePull (ImagePullBackOff)",
                                    "description": described["ArcflowRunnerPodStuck"],
                                },
                            }
                        ],
                    },
                    # 15 min after the last reap the increase is gone.
                    {"eval_time": "25m", "alertname": "ArcflowRunnerPodStuck", "exp_alerts": []},
                    {
                        "eval_time": "9m",
                        "alertname": "ArcflowJobsAssignedNotStarted",
                        "exp_alerts": [],
                    },
                    {
                        "eval_time": "11m",
                        "alertname": "ArcflowJobsAssignedNotStarted",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "namespace": "runners",
                                    "name": "ars-gpu",
                                    "severity": "warning",
                                },
                                "exp_annotations": {
                                    "summary": "Jobs assigned to runners/ars-gpu have not started",
                                    "description": described["ArcflowJobsAssignedNotStarted"],
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "alerts-test.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = _promtool(promtool, "test", "rules", "alerts-test.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
