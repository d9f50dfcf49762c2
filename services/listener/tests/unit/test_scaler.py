"""The scaler state machine of spec/arc-objects.md §4.4, call by call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from arcflow.common.constants import ANNOTATION_JOB_COMPLETED
from arcflow.common.events import JobInfo
from arcflow.listener.scaler import (
    MAX_INT32,
    Decision,
    DesiredRunnerScaler,
    ers_patch,
    runner_completed_patch,
    runner_status_patch,
)


def test_first_call_always_yields_patch_id_zero() -> None:
    scaler = DesiredRunnerScaler(min_runners=2, max_runners=10)
    assert (scaler.target, scaler.patch_seq, scaler.dirty) == (-1, -1, False)
    decision = scaler.decide(3)
    assert decision.target == 5
    assert decision.patch_id == 0
    assert scaler.patch_seq == 0


def test_sequence_increments_and_forces_zero_only_when_idle_at_min() -> None:
    scaler = DesiredRunnerScaler(min_runners=1, max_runners=10)
    assert scaler.decide(0).patch_id == 0  # first call
    # Not dirty, unchanged, equal to min -> forced 0 even though the sequence moved on.
    second = scaler.decide(0)
    assert (second.target, second.patch_id, scaler.patch_seq) == (1, 0, 1)
    # Target moves -> the sequence number is the patch id.
    third = scaler.decide(2)
    assert (third.target, third.patch_id) == (3, 2)
    # Unchanged but above min -> not forced.
    assert scaler.decide(2).patch_id == 3
    # Back to min: target changed this call -> not forced.
    assert scaler.decide(0).patch_id == 4
    # Unchanged at min and nothing happened -> forced.
    assert scaler.decide(0).patch_id == 0


def test_dirty_prevents_the_forced_zero_once() -> None:
    scaler = DesiredRunnerScaler(min_runners=0, max_runners=5)
    scaler.decide(0)
    scaler.job_completed()
    assert scaler.decide(0).patch_id == 1  # dirty: the sequence number, not 0
    assert scaler.dirty is False
    assert scaler.decide(0).patch_id == 0
    scaler.job_started()
    decision = scaler.decide(0)
    assert decision.patch_id == 3
    assert decision.was_dirty is True


def test_target_is_capped_by_max_runners() -> None:
    scaler = DesiredRunnerScaler(min_runners=2, max_runners=4)
    assert scaler.decide(100).target == 4
    assert scaler.desired_count(1) == 3


def test_patch_sequence_wraps_at_max_int32() -> None:
    scaler = DesiredRunnerScaler(min_runners=0, max_runners=MAX_INT32)
    scaler.decide(1)
    scaler.patch_seq = MAX_INT32
    decision = scaler.decide(2)
    assert scaler.patch_seq == 1
    assert decision.patch_id == 1


def test_invalid_bounds_are_rejected() -> None:
    with pytest.raises(ValueError, match="min_runners 3 > max_runners 2"):
        DesiredRunnerScaler(3, 2)
    with pytest.raises(ValueError, match="negative"):
        DesiredRunnerScaler(0, 1).decide(-1)


def test_ers_patch_sends_null_for_zero_replicas() -> None:
    assert ers_patch(Decision(target=0, patch_id=7, assigned_jobs=0, was_dirty=False)) == {
        "spec": {"patchID": 7, "replicas": None}
    }
    assert ers_patch(Decision(target=3, patch_id=0, assigned_jobs=3, was_dirty=True)) == {
        "spec": {"patchID": 0, "replicas": 3}
    }


def test_runner_status_patch_omits_empty_values() -> None:
    job = JobInfo(
        message_type="JobStarted",
        runner_request_id=42,
        job_id="j-1",
        repository_name="repo",
        owner_name="octo",
        job_workflow_ref="octo/repo/.github/workflows/ci.yml@refs/heads/main",
        workflow_run_id=0,
        runner_name="r-1",
    )
    assert runner_status_patch(job) == {
        "jobRequestId": 42,
        "jobRepositoryName": "octo/repo",
        "jobId": "j-1",
        "jobWorkflowRef": "octo/repo/.github/workflows/ci.yml@refs/heads/main",
    }


def test_an_unchanged_count_against_the_standing_request_is_skipped() -> None:
    """ADR 0043: the caller names the request the ERS holds; the same count is not re-sent,
    the sequence does not move, and the skipped decision reports the standing patch id."""
    scaler = DesiredRunnerScaler(min_runners=0, max_runners=10)
    scaler.decide(0)
    sent = scaler.decide(2)
    assert (sent.target, sent.patch_id, sent.skipped) == (2, 1, False)
    scaler.job_started()
    skipped = scaler.decide(2, unchanged_since=(sent.target, sent.patch_id))
    assert (skipped.target, skipped.patch_id, skipped.skipped) == (2, 1, True)
    assert skipped.was_dirty is True
    assert (scaler.target, scaler.patch_seq, scaler.dirty) == (2, 1, False)
    # A changed count is never skipped: the sequence goes on from the last sent id.
    moved = scaler.decide(3, unchanged_since=(2, 1))
    assert (moved.target, moved.patch_id, moved.skipped) == (3, 2, False)


def test_a_skip_consumes_the_dirty_flag_like_a_sent_patch() -> None:
    """After a skipped JobStarted batch at min runners the next idle tick forces patchID 0,
    as it would after upstream's (no-op) patch."""
    scaler = DesiredRunnerScaler(min_runners=1, max_runners=5)
    scaler.decide(0)
    assert scaler.decide(1).patch_id == 1
    assert scaler.decide(0).patch_id == 2  # back to min
    scaler.job_started()
    assert scaler.decide(0, unchanged_since=(1, 2)).skipped
    assert scaler.decide(0).patch_id == 0


def test_an_idle_tick_at_the_minimum_forces_the_state_within_the_window() -> None:
    """A batch that completed the last jobs writes the minimum with a new patchID; the next
    idle tick forces patchID 0 at once although that count stands in the window, so the set
    removes idle runners a superseded request made (upstream forces it on every empty batch at
    the minimum). The forced state, once written, holds the later ticks back (ADR 0119)."""
    scaler = DesiredRunnerScaler(min_runners=0, max_runners=5)
    scaler.decide(4)
    scaler.job_completed()
    last = scaler.decide(0)  # the batch with the last completions
    assert (last.target, last.skipped) == (0, False)
    assert last.patch_id != 0
    forced = scaler.decide(0, unchanged_since=(0, last.patch_id))
    assert (forced.target, forced.patch_id, forced.skipped) == (0, 0, False)
    again = scaler.decide(0, unchanged_since=(0, 0))
    assert again.skipped


def test_without_a_standing_request_nothing_is_skipped() -> None:
    scaler = DesiredRunnerScaler(min_runners=0, max_runners=5)
    scaler.decide(1)
    scaler.job_started()
    decision = scaler.decide(1)
    assert (decision.patch_id, decision.skipped) == (1, False)


def test_the_shared_capacity_caps_the_count_beside_the_minimum() -> None:
    scaler = DesiredRunnerScaler(min_runners=2, max_runners=10)
    assert scaler.desired_count(5) == 7
    assert scaler.desired_count(5, capacity=4) == 4
    assert scaler.desired_count(0, capacity=0) == 0
    assert scaler.decide(5, capacity=3).target == 3


def test_the_share_rides_on_the_ers_patch() -> None:
    decision = Decision(target=2, patch_id=7, assigned_jobs=2, was_dirty=True)
    assert ers_patch(decision, {"arcflow.io/capacity-share": "{}"}) == {
        "spec": {"patchID": 7, "replicas": 2},
        "metadata": {"annotations": {"arcflow.io/capacity-share": "{}"}},
    }


def test_a_completed_job_is_written_on_its_runner_at_githubs_finish_time() -> None:
    """ADR 0100: the annotation the reconciler's grace period counts from; GitHub's finish time
    (in UTC) so a redelivered batch writes the same value, else when the listener learned it."""
    now = datetime(2026, 12, 2, 12, 0, 30, tzinfo=UTC)
    finished = datetime(2026, 12, 2, 13, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    job = JobInfo(message_type="JobCompleted", runner_name="r-1", finish_time=finished)
    assert runner_completed_patch(job, now) == {
        "metadata": {"annotations": {ANNOTATION_JOB_COMPLETED: "2026-12-02T12:00:05Z"}}
    }
    unknown = JobInfo(message_type="JobCompleted", runner_name="r-1")
    patch = runner_completed_patch(unknown, now)
    assert patch["metadata"]["annotations"][ANNOTATION_JOB_COMPLETED] == "2026-12-02T12:00:30Z"
