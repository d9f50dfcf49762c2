"""The stage chain's hand-over stamp (ADR 0065): the listener's send time of an ERS scale patch,
used by the reconciler only when it is plausible."""

from __future__ import annotations

import itertools

import pytest

from arcflow.common.stages import (
    MAX_REQUEST_STAMP_AGE,
    STAGES,
    TO_JOB_STARTED,
    parse_request_stamp,
    request_stamp,
    request_start,
)

SEEN = 1_764_600_000.5


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
