"""Whose runner spec change: the ARS's template or a direct ERS edit (ADR 0037)."""

from __future__ import annotations

from arcflow.common.constants import ANNOTATION_INTEGRITY_HASH as HASH
from arcflow.reconciler.controllers.runner_spec_drift import (
    ANNOTATION_APPLIED_RUNNER_SPEC as APPLIED,
)
from arcflow.reconciler.controllers.runner_spec_drift import (
    RunnerSpecDrift,
    runner_spec_drift,
    wanted_annotations,
)


def test_in_line_is_neither() -> None:
    assert runner_spec_drift({HASH: "a", APPLIED: "a"}, "a") == RunnerSpecDrift(False, False)


def test_a_direct_edit_stands_while_the_ars_is_unchanged() -> None:
    assert runner_spec_drift({HASH: "edited", APPLIED: "a"}, "a") == RunnerSpecDrift(False, True)


def test_an_ars_change_wins_over_a_direct_edit() -> None:
    assert runner_spec_drift({HASH: "edited", APPLIED: "a"}, "b") == RunnerSpecDrift(True, False)
    assert runner_spec_drift({HASH: "a", APPLIED: "a"}, "b") == RunnerSpecDrift(True, False)


def test_an_ers_without_the_applied_hash_is_judged_by_its_hash_as_before() -> None:
    assert runner_spec_drift({HASH: "a"}, "a") == RunnerSpecDrift(False, False)
    assert runner_spec_drift({HASH: "other"}, "a") == RunnerSpecDrift(True, False)
    assert runner_spec_drift({}, "a") == RunnerSpecDrift(True, False)


def test_the_integrity_hash_is_written_only_with_a_spec_patch() -> None:
    built = {HASH: "b", "x": "1"}
    assert wanted_annotations(built, "b", RunnerSpecDrift(True, False)) == {
        HASH: "b",
        "x": "1",
        APPLIED: "b",
    }
    assert wanted_annotations(built, "b", RunnerSpecDrift(False, True)) == {"x": "1", APPLIED: "b"}
