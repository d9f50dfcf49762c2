"""The stage names (``arcflow.common.stages``): one table, and the sets derived from it agree."""

from __future__ import annotations

from arcflow.common.stages import (
    LISTENER_STAGES,
    RECONCILER_STAGES,
    REPORTED_AFTER_START,
    STAGE_BUCKETS,
    STAGE_LABELS,
    STAGE_NAMES,
    STAGES,
    TO_JOB_STARTED,
)


def test_every_stage_has_one_observer_and_a_unique_name() -> None:
    assert len(set(STAGE_NAMES)) == len(STAGES)
    assert set(STAGE_NAMES) == LISTENER_STAGES | RECONCILER_STAGES
    assert not LISTENER_STAGES & RECONCILER_STAGES


def test_the_chain_to_job_started_starts_at_queued_and_ends_at_job_started() -> None:
    assert TO_JOB_STARTED[0] == "queued"
    assert TO_JOB_STARTED[-1] == "job_started"
    assert REPORTED_AFTER_START in STAGE_NAMES
    assert REPORTED_AFTER_START not in TO_JOB_STARTED


def test_buckets_rise_and_labels_carry_upstreams_then_ours() -> None:
    assert list(STAGE_BUCKETS) == sorted(set(STAGE_BUCKETS))
    assert STAGE_LABELS[:5] == ("name", "namespace", "enterprise", "organization", "repository")
    assert STAGE_LABELS[-1] == "stage"
