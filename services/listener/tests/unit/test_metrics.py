"""Upstream metric names, labels and buckets; listenerMetrics replacing the defaults."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from arcflow.common.events import JobInfo, JobStatistics
from arcflow.listener.metrics import (
    DEFAULT_BUCKETS,
    ListenerMetrics,
    metric_specs_from_config,
    parse_metrics_addr,
    parse_workflow_ref,
)


def scrape(metrics: ListenerMetrics) -> str:
    return metrics.exposition().decode()


def test_default_buckets_are_45_increasing_values_from_10ms_to_an_hour() -> None:
    assert len(DEFAULT_BUCKETS) == 45
    assert DEFAULT_BUCKETS[0] == 0.01
    assert DEFAULT_BUCKETS[-1] == 3600
    assert list(DEFAULT_BUCKETS) == sorted(set(DEFAULT_BUCKETS))


def test_one_series_per_scale_set_with_its_own_name_label() -> None:
    metrics = ListenerMetrics()
    url = "https://github.com/octo"
    cpu = metrics.recorder_for(url, "arc-cpu", "ci")
    gpu = metrics.recorder_for(url, "arc-gpu", "ci")
    cpu.record_static(0, 10)
    gpu.record_static(1, 2)
    cpu.record_statistics(JobStatistics(total_assigned_jobs=3, total_running_jobs=1))
    gpu.record_statistics(JobStatistics(total_assigned_jobs=1))
    cpu.record_desired(3)
    gpu.record_desired(2)
    text = scrape(metrics)
    labels = 'enterprise="",name="arc-cpu",namespace="ci",organization="octo",repository=""'
    assert f"gha_assigned_jobs{{{labels}}} 3.0" in text
    assert f"gha_running_jobs{{{labels}}} 1.0" in text
    assert f"gha_desired_runners{{{labels}}} 3.0" in text
    assert f"gha_max_runners{{{labels}}} 10.0" in text
    assert 'gha_desired_runners{enterprise="",name="arc-gpu",namespace="ci"' in text
    assert 'gha_min_runners{enterprise="",name="arc-gpu"' in text
    assert metrics.provider is not None
    metrics.provider.shutdown()


def test_job_counters_and_histograms_use_job_labels() -> None:
    metrics = ListenerMetrics()
    recorder = metrics.recorder_for("https://github.com/enterprises/big", "arc", "ci")
    t0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    job = JobInfo(
        message_type="JobStarted",
        owner_name="octo",
        repository_name="repo",
        job_display_name="build",
        event_name="push",
        scale_set_assign_time=t0,
        runner_assign_time=t0.replace(second=7),
    )
    recorder.record_job_started(job)
    done = job.model_copy(
        update={
            "message_type": "JobCompleted",
            "result": "succeeded",
            "finish_time": t0.replace(minute=1),
        }
    )
    recorder.record_job_completed(done)
    never_ran = JobInfo(message_type="JobCompleted", result="canceled")
    recorder.record_job_completed(never_ran)  # skipped: no runner assign time
    text = scrape(metrics)
    started = (
        'gha_started_jobs_total{enterprise="big",event_name="push",job_name="build",'
        'organization="octo",repository="repo"} 1.0'
    )
    assert started in text
    assert 'job_result="succeeded"' in text
    assert 'job_result="canceled"' not in text
    assert 'gha_job_startup_duration_seconds_sum{enterprise="big"' in text
    assert "gha_job_startup_duration_seconds_bucket" in text
    assert text.count('gha_job_startup_duration_seconds_bucket{enterprise="big"') == 46  # +Inf
    assert 'gha_job_execution_duration_seconds_sum{enterprise="big",event_name="push",' in text
    assert metrics.provider is not None
    metrics.provider.shutdown()


def test_queue_duration_runs_from_the_queue_time_to_the_runners_start() -> None:
    """ARC #4431: ``gha_job_queue_duration_seconds``, whole seconds as upstream's job
    histograms, with the started-job labels. The queue time comes from the JobStarted when
    it carries one, else from the job's JobAssigned (GitHub may leave it out of JobStarted)."""
    metrics = ListenerMetrics()
    recorder = metrics.recorder_for("https://github.com/octo", "arc", "ci")
    t0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assigned = JobInfo(
        message_type="JobAssigned",
        job_id="j1",
        job_display_name="build",
        event_name="push",
        queue_time=t0,
        scale_set_assign_time=t0.replace(second=2),
    )
    recorder.record_job_assigned(assigned)
    started = assigned.model_copy(
        update={
            "message_type": "JobStarted",
            "queue_time": None,
            "runner_assign_time": t0.replace(second=9, microsecond=700_000),
        }
    )
    recorder.record_job_started(started)
    own = started.model_copy(update={"job_id": "j2", "queue_time": t0.replace(second=5)})
    recorder.record_job_started(own)
    unknown = started.model_copy(update={"job_id": "j3"})
    recorder.record_job_started(unknown)  # no queue time anywhere: not observed
    text = scrape(metrics)
    labels = 'enterprise="",event_name="push",job_name="build",organization="",repository=""'
    assert f"gha_job_queue_duration_seconds_sum{{{labels}}} 13.0" in text  # 9 + 4
    assert f"gha_job_queue_duration_seconds_count{{{labels}}} 2.0" in text
    assert metrics.provider is not None
    metrics.provider.shutdown()


def test_listener_metrics_config_replaces_defaults(caplog: pytest.LogCaptureFixture) -> None:
    config = {
        "gauges": {"gha_desired_runners": {"labels": ["name"]}, "gha_bogus": {"labels": []}},
        "counters": {"gha_desired_runners": {"labels": ["name"]}},
        "histograms": {"gha_job_startup_duration_seconds": {"labels": ["name"], "buckets": [1, 5]}},
    }
    with caplog.at_level(logging.WARNING, logger="arcflow.listener.metrics"):
        specs = metric_specs_from_config(config)
    assert set(specs) == {"gha_desired_runners", "gha_job_startup_duration_seconds"}
    assert specs["gha_job_startup_duration_seconds"].buckets == (1.0, 5.0)
    assert "gha_bogus" in caplog.text
    assert "not in listenerMetrics.counters" in caplog.text
    metrics = ListenerMetrics(specs)
    recorder = metrics.recorder_for("https://github.com/octo", "arc", "ci")
    recorder.record_desired(4)
    recorder.record_statistics(JobStatistics(total_assigned_jobs=9))
    text = scrape(metrics)
    assert 'gha_desired_runners{name="arc"} 4.0' in text
    assert "gha_assigned_jobs" not in text
    assert metrics.provider is not None
    metrics.provider.shutdown()


def test_parse_metrics_addr_and_workflow_ref() -> None:
    assert parse_metrics_addr(":8080") == ("0.0.0.0", 8080)
    assert parse_metrics_addr("127.0.0.1:0") == ("127.0.0.1", 0)
    with pytest.raises(ValueError, match="host:port"):
        parse_metrics_addr("8080")

    # Upstream's label values (issue 15 item 7), so existing dashboards keep matching.
    assert parse_workflow_ref("o/r/.github/workflows/ci.yml@refs/heads/main") == (
        "ci",
        "heads/main",
    )
    assert parse_workflow_ref("o/r/.github/workflows/rel.yml@refs/tags/v1.0.0") == (
        "rel",
        "tags/v1.0.0",
    )
    assert parse_workflow_ref("o/r/.github/workflows/x.yaml@refs/pull/123/merge") == (
        "x",
        "pull/123",
    )
    assert parse_workflow_ref("o/r/.github/workflows/ci.yml") == ("", "")
    assert parse_workflow_ref("") == ("", "")
