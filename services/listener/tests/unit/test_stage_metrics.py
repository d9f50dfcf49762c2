"""The listener's part of the stage breakdown, gha_available/acquired_jobs and the session
gauge (ADR 0065), read from the listener's own exposition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families

from arcflow.common.events import JobInfo, JobStatistics
from arcflow.listener.metrics import ListenerMetrics, default_metric_specs, stage_metric_specs

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def samples(metrics: ListenerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _value(found: dict, metric: str, **labels: str) -> float:  # type: ignore[type-arg]
    hits = [
        v
        for (n, ls), v in found.items()
        if n == metric and all((k, v2) in ls for k, v2 in labels.items())
    ]
    assert len(hits) == 1, (metric, labels, hits)
    return float(hits[0])


def test_stages_statistics_and_session_gauge() -> None:
    metrics = ListenerMetrics({**default_metric_specs(), **stage_metric_specs()})
    now = (T0 + timedelta(seconds=3.5)).timestamp()
    gpu = metrics.recorder_for("https://github.com/octo/app", "arc-gpu", "ci", variant="gpu")
    gpu._clock = lambda: now  # the ERS patch was written 2.25 s after the assignment
    gpu.record_static(0, 5)
    found = samples(metrics)
    assert _value(found, "arcflow_listener_session_open", name="arc-gpu") == 0
    gpu.record_statistics(JobStatistics(total_available_jobs=4, total_acquired_jobs=2))
    job = JobInfo(
        message_type="JobAssigned",
        queue_time=T0,
        scale_set_assign_time=T0 + timedelta(seconds=1.25),
        owner_name="octo",
        repository_name="app",
    )
    gpu.record_job_assigned(job)
    started = job.model_copy(
        update={
            "message_type": "JobCompleted",
            "runner_assign_time": T0 + timedelta(seconds=5),
            "finish_time": T0 + timedelta(seconds=65.5),
            "result": "succeeded",
        }
    )
    gpu.record_job_completed(started)
    found = samples(metrics)
    base = {"name": "arc-gpu", "namespace": "ci", "variant": "gpu", "organization": "octo"}
    assert _value(found, "arcflow_runner_stage_seconds_sum", stage="queued", **base) == 1.25
    assert (
        _value(found, "arcflow_runner_stage_seconds_sum", stage="scale_requested", **base) == 2.25
    )
    assert _value(found, "arcflow_runner_stage_seconds_sum", stage="job_finished", **base) == 60.5
    assert _value(found, "gha_available_jobs", name="arc-gpu") == 4
    assert _value(found, "gha_acquired_jobs", name="arc-gpu") == 2
    assert _value(found, "arcflow_listener_session_open", name="arc-gpu") == 1
    gpu.record_session_closed()
    assert _value(samples(metrics), "arcflow_listener_session_open", name="arc-gpu") == 0


def test_scale_requested_ends_at_the_stamp_the_ers_patch_carried() -> None:
    """Where the reconciler's ``runner_created`` starts (ADR 0065), not when it was recorded."""
    metrics = ListenerMetrics({**default_metric_specs(), **stage_metric_specs()})
    recorder = metrics.recorder_for("https://github.com/octo", "arc", "ci")
    recorder._clock = lambda: (T0 + timedelta(seconds=9)).timestamp()  # recorded much later
    job = JobInfo(message_type="JobAssigned", queue_time=T0, scale_set_assign_time=T0)
    recorder.record_job_assigned(job, (T0 + timedelta(seconds=0.125)).timestamp())
    found = samples(metrics)
    assert _value(found, "arcflow_runner_stage_seconds_sum", stage="scale_requested") == 0.125


def test_a_stamp_older_than_the_assignment_ends_scale_requested_now() -> None:
    """The request the ERS holds predates the job (not its runner's): the recording time."""
    metrics = ListenerMetrics({**default_metric_specs(), **stage_metric_specs()})
    recorder = metrics.recorder_for("https://github.com/octo", "arc", "ci")
    recorder._clock = lambda: (T0 + timedelta(seconds=2)).timestamp()
    job = JobInfo(message_type="JobAssigned", queue_time=T0, scale_set_assign_time=T0)
    recorder.record_job_assigned(job, (T0 - timedelta(seconds=5)).timestamp())
    found = samples(metrics)
    assert _value(found, "arcflow_runner_stage_seconds_sum", stage="scale_requested") == 2


def test_a_job_without_times_observes_nothing() -> None:
    metrics = ListenerMetrics({**default_metric_specs(), **stage_metric_specs()})
    recorder = metrics.recorder_for("https://github.com/octo", "arc", "ci")
    recorder.record_job_assigned(JobInfo(message_type="JobAssigned"))
    assert not [k for k in samples(metrics) if k[0].startswith("arcflow_runner_stage")]
