"""The stage names (``arcflow.common.stages``): one table, and the sets derived from it agree;
the chain's hand-over stamp (ADR 0065), the listener's send time of an ERS scale patch, used
by the reconciler only when it is plausible."""

from __future__ import annotations

import itertools

import pytest

from arcflow.common.stages import (
    LISTENER_STAGES,
    MAX_REQUEST_STAMP_AGE,
    RECONCILER_STAGES,
    REPORTED_AFTER_START,
    STAGE_BUCKETS,
    STAGE_LABELS,
    STAGE_NAMES,
    STAGES,
    TO_JOB_STARTED,
    parse_request_stamp,
    request_stamp,
    request_start,
)

SEEN = 1_764_600_000.5


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


def test_a_stamp_round_trips_to_the_millisecond() -> None:
    at = round(SEEN - 0.2345678, 3)
    assert parse_request_stamp(request_stamp(17, at)) == (17, at)


def test_the_stamp_of_this_patch_id_starts_the_request() -> None:
    assert request_start(request_stamp(17, SEEN - 0.8), 17, SEEN) == pytest.approx(SEEN - 0.8)
    assert request_start(request_stamp(17, SEEN), 17, SEEN) == SEEN


@pytest.mark.parametrize(
    ("stamp", "why"),
    [
        (None, "no stamp"),
        (request_stamp(16, SEEN - 0.5), "another patchID's stamp (a patch that sent none)"),
        (request_stamp(17, SEEN + 0.01), "in the future: the listener's clock runs ahead"),
        (request_stamp(17, SEEN - MAX_REQUEST_STAMP_AGE - 1), "implausibly old"),
        ("17@soon", "not a time"),
        ("17", "no @"),
        ("x@1.0", "not a patchID"),
        ("17@nan", "not finite"),
        ("17@inf", "not finite"),
        (17, "not a string"),
    ],
)
def test_an_implausible_stamp_falls_back_to_the_seen_time(stamp: object, why: str) -> None:
    assert request_start(stamp, 17, SEEN) == SEEN, why


def test_the_chain_is_contiguous_by_its_descriptions() -> None:
    """Each stage of the chain starts where the one before it ends (same wording, or the
    same moment named by both observers)."""
    described = {stage: (start, end) for stage, _, start, end in STAGES}
    assert TO_JOB_STARTED[-1] == "job_started"
    assert "stamp" in described["scale_requested"][1]
    assert "stamp" in described["runner_created"][0]
    for before, after in itertools.pairwise(TO_JOB_STARTED[2:]):
        end, start = described[before][1], described[after][0]
        assert end.split()[0] in start or start.split()[0] in end, (before, after)
