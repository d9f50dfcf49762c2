"""Pure tests: the example ARS, the demo plan, percentiles and the summary document."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcflow.devstack import demo
from arcflow.devstack.demo import JobRecord, SummaryInputs

VARIANTS = ["cpu-small", "cpu-large", "gpu"]


def _example() -> dict:
    path = demo.find_example(Path(__file__).parent)
    assert path is not None
    return demo.prepare_ars(demo.load_example_ars(path), github_config_url="http://sim/org")


def test_example_targets_three_variants_with_unique_labels() -> None:
    targets = demo.variant_targets(_example())
    assert [t.variant for t in targets] == VARIANTS
    assert [t.job_labels for t in targets] == [
        ["arc-runners-cpu-small"],
        ["arc-runners-cpu-large"],
        ["arc-runners-gpu"],
    ]


def test_prepare_points_the_ars_at_the_stack() -> None:
    ars = _example()
    assert ars["spec"]["githubConfigUrl"] == "http://sim/org"
    assert ars["spec"]["githubConfigSecret"] == "arc-github-secret"


def test_prepare_rejects_an_ars_without_name() -> None:
    with pytest.raises(demo.DemoError, match=r"metadata\.name"):
        demo.prepare_ars({"kind": "AutoscalingRunnerSet", "spec": {}}, github_config_url=None)


def test_load_example_rejects_a_file_without_ars(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("kind: ConfigMap\n")
    with pytest.raises(demo.DemoError, match="no AutoscalingRunnerSet"):
        demo.load_example_ars(path)


def test_plan_spreads_round_robin_with_varied_durations() -> None:
    targets = demo.variant_targets(_example())
    plan = demo.plan_demo_jobs(targets, 7, base_duration=2.0)
    assert [j.variant for j in plan] == [*VARIANTS, *VARIANTS, "cpu-small"]
    assert [j.duration for j in plan] == [2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0]
    assert demo.plan_demo_jobs(targets, 7, base_duration=2.0) == plan


def test_plan_rejects_bad_input() -> None:
    with pytest.raises(demo.DemoError):
        demo.plan_demo_jobs([], 3)
    with pytest.raises(demo.DemoError):
        demo.plan_demo_jobs(demo.variant_targets(_example()), -1)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert demo.percentile(values, 0.5) == 10.0
    assert demo.percentile(values, 0.95) == 19.0
    assert demo.percentile(values, 1.0) == 20.0
    assert demo.percentile([3.0], 0.95) == 3.0
    assert demo.percentile([], 0.5) is None


def _job(variant: str, state: str, result: str | None, pod: float | None, start: float | None):
    return JobRecord(
        job_id=f"{variant}-{state}-{pod}",
        variant=variant,
        queued_at=100.0,
        runner_pod_created_at=pod,
        started_at=start,
        result=result,
        state=state,
    )


def test_summary_counts_and_latencies() -> None:
    jobs = [
        _job("cpu-small", "completed", "succeeded", 99.0, 101.0),  # pre-warmed pod: 0 s
        _job("cpu-large", "completed", "succeeded", 102.0, 103.0),
        _job("gpu", "completed", "failed", 104.0, 106.0),
        _job("gpu", "running", None, 105.0, 109.0),
        _job("gpu", "queued", None, None, None),
    ]
    summary = demo.build_summary(
        SummaryInputs(
            jobs=jobs,
            variants=VARIANTS,
            scale_set_ids={"cpu-small": 1, "gpu": 3},
            pods_created={"runner": 4, "listener": 1},
            objects_created={"Pod": 5},
            components={"watcher": "running"},
        )
    )
    assert summary["ok"] is False
    assert summary["scale_set_ids"] == {"cpu-small": 1, "cpu-large": None, "gpu": 3}
    assert summary["jobs"]["total"] == 5
    assert summary["jobs"]["completed"] == 2
    assert summary["jobs"]["failed"] == 1
    assert summary["jobs"]["per_variant"]["gpu"] == {"queued": 3, "completed": 0, "failed": 1}
    assert summary["jobs"]["per_variant"]["cpu-small"] == {
        "queued": 1,
        "completed": 1,
        "failed": 0,
    }
    to_pod = summary["latency_seconds"]["job_queued_to_runner_pod_created"]
    assert to_pod == {"count": 4, "p50": 2.0, "p95": 5.0, "max": 5.0}
    to_start = summary["latency_seconds"]["job_queued_to_job_started"]
    assert to_start == {"count": 4, "p50": 3.0, "p95": 9.0, "max": 9.0}


def test_summary_ok_only_when_all_done_and_nothing_blocked() -> None:
    done = [_job("gpu", "completed", "succeeded", 101.0, 101.5)]
    base = {
        "variants": VARIANTS,
        "scale_set_ids": {},
        "pods_created": {},
        "objects_created": {},
        "components": {},
    }
    assert demo.build_summary(SummaryInputs(jobs=done, **base))["ok"] is True
    blocked = SummaryInputs(jobs=done, blocked_by=["reconciler"], **base)
    assert demo.build_summary(blocked)["ok"] is False
    assert demo.build_summary(SummaryInputs(jobs=[], **base))["ok"] is False


def test_counts_by_variant_for_the_view() -> None:
    jobs = [
        _job("gpu", "assigned", None, None, None),
        _job("gpu", "running", None, 101.0, 102.0),
        _job("gpu", "completed", "succeeded", 101.0, 102.0),
        _job("gpu", "completed", "canceled", None, None),
    ]
    counts = demo.counts_by_variant(jobs, VARIANTS)
    assert (counts["gpu"].queued, counts["gpu"].running) == (1, 1)
    assert (counts["gpu"].done, counts["gpu"].failed) == (1, 1)
    assert counts["cpu-small"].queued == 0


def test_jobs_queued_besides_the_demo_count_for_their_variant() -> None:
    targets = demo.variant_targets(_example())
    listed = [
        {"jobId": "demo-1", "labels": ["arc-runners-gpu"], "state": "running"},
        {"jobId": "x1", "labels": ["arc-runners-gpu"], "state": "completed", "result": "succeeded"},
        {"jobId": "x2", "labels": ["arc-runners-cpu-small"], "state": "queued"},
        {"jobId": "x3", "labels": ["someone-else"], "state": "queued"},
    ]
    others = demo.other_jobs(listed, ["demo-1"], targets)
    assert [(j.job_id, j.variant) for j in others] == [("x1", "gpu"), ("x2", "cpu-small")]
    counts = demo.counts_by_variant(others, VARIANTS)
    assert (counts["gpu"].done, counts["cpu-small"].queued, counts["cpu-large"].queued) == (1, 1, 0)
