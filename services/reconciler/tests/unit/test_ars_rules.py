"""The AutoscalingRunnerSet rules: the version gate, the outdated-set loop guard, the id
annotations mirrored from the registrar, the summed status."""

from __future__ import annotations

import pytest

from arcflow.reconciler.controllers.ars_rules import (
    ANNOTATION_OUTDATED_RECREATIONS,
    annotations_need_patch,
    is_version_allowed,
    outdated_records,
    outdated_recreate_delay,
    sum_status,
)


@pytest.mark.parametrize(
    ("label", "build", "allowed"),
    [
        ("0.13.0", "dev", True),
        ("", "dev", True),
        ("anything", "canary-1234", True),
        ("0.14.2", "0.14.2", True),
        ("0.14.0", "0.14.2", True),
        ("v0.14.1", "0.14.9-rc.1", True),
        ("0.13.9", "0.14.2", False),
        ("1.14.2", "0.14.2", False),
        ("", "0.14.2", False),
        ("garbage", "0.14.2", False),
        ("0.14.2", "garbage", False),
        ("garbage", "garbage", True),  # equal strings are always allowed
    ],
)
def test_version_gate(label: str, build: str, allowed: bool) -> None:
    assert is_version_allowed(label, build) is allowed


def test_outdated_recreation_delay_doubles_from_the_second_time() -> None:
    assert [outdated_recreate_delay(n, 60, 600) for n in range(6)] == [0, 60, 120, 240, 480, 600]


def test_unreadable_loop_guard_records_count_as_none() -> None:
    key = ANNOTATION_OUTDATED_RECREATIONS
    assert outdated_records({}) == {}
    assert outdated_records({key: "not json"}) == {}
    assert outdated_records({key: "[1, 2]"}) == {}
    assert outdated_records({key: '{"gpu": {"attempts": 2}}'}) == {"gpu": {"attempts": 2}}


def test_id_annotations_need_a_patch_only_when_a_wanted_key_differs() -> None:
    current = {"a": "1", "b": "x", "other": "kept"}
    assert not annotations_need_patch(current, {"a": "1", "b": "x"})
    assert annotations_need_patch(current, {"a": "2"})
    assert annotations_need_patch(current, {"b": None})  # a key to remove
    assert not annotations_need_patch(current, {"gone": None})


def test_status_sums_every_runner_set_and_reads_missing_counts_as_zero() -> None:
    sets = [
        {
            "status": {
                "currentReplicas": 2,
                "pendingEphemeralRunners": 1,
                "runningEphemeralRunners": 1,
            }
        },
        {"status": {"currentReplicas": 3, "failedEphemeralRunners": 1}},
        {},
    ]
    assert sum_status(sets) == {"current": 5, "pending": 1, "running": 1, "failed": 1}
