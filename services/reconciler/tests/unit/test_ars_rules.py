"""The AutoscalingRunnerSet rules: the version gate, the outdated-set loop guard, the id
annotations mirrored from the registrar, the ARS's own URL labels, the summed status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arcflow.common.constants import LABEL_ENTERPRISE, LABEL_ORGANIZATION, LABEL_REPOSITORY
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet
from arcflow.reconciler.controllers.ars_rules import (
    ANNOTATION_OUTDATED_RECREATIONS,
    OutdatedRecord,
    annotations_need_patch,
    encode_outdated_records,
    is_version_allowed,
    outdated_records,
    outdated_recreate_delay,
    sum_status,
    url_labels,
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
    assert outdated_records({key: '{"gpu": "x", "arm": {"count": "many"}}'}) == {}
    records = {"gpu": OutdatedRecord(2, 1700000000.5, "u1"), "": OutdatedRecord()}
    assert outdated_records({key: encode_outdated_records(records)}) == records
    assert json.loads(encode_outdated_records(records))["gpu"] == {
        "count": 2,
        "last": 1700000000.5,
        "uid": "u1",
    }


def test_id_annotations_need_a_patch_only_when_a_wanted_key_differs() -> None:
    current = {"a": "1", "b": "x", "other": "kept"}
    assert not annotations_need_patch(current, {"a": "1", "b": "x"})
    assert annotations_need_patch(current, {"a": "2"})
    assert annotations_need_patch(current, {"b": None})  # a key to remove
    assert not annotations_need_patch(current, {"gone": None})


def test_status_sums_every_runner_set_and_reads_missing_counts_as_zero() -> None:
    docs: list[dict[str, Any]] = [
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
    sets = [EphemeralRunnerSet.model_validate(doc) for doc in docs]
    assert sum_status(sets) == {"current": 5, "pending": 1, "running": 1, "failed": 1}


# --- the ARS's own URL labels (docs/upstream-behaviour.md#ars-url-labels) ---


def _ars(url: str, labels: dict[str, str] | None = None) -> AutoscalingRunnerSet:
    manifest: dict[str, Any] = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a", "namespace": "ns", "labels": labels or {}},
        "spec": {
            "githubConfigUrl": url,
            "githubConfigSecret": "s",
            "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
        },
    }
    return AutoscalingRunnerSet.from_manifest(manifest)


@pytest.mark.parametrize(
    ("url", "enterprise", "organization", "repository"),
    [
        ("https://github.com/acme", None, "acme", None),
        ("https://github.com/acme/app", None, "acme", "app"),
        ("https://github.com/enterprises/big", "big", None, None),
        ("https://ghes.example.com/acme/app", None, "acme", "app"),
    ],
)
def test_only_the_parts_the_url_has(
    url: str, enterprise: str | None, organization: str | None, repository: str | None
) -> None:
    assert url_labels(_ars(url)) == {
        LABEL_ENTERPRISE: enterprise,
        LABEL_ORGANIZATION: organization,
        LABEL_REPOSITORY: repository,
    }


def test_values_are_trimmed_to_label_values() -> None:
    long = "o" * 70
    labels = url_labels(_ars(f"https://github.com/{long}/-repo-"))
    assert labels[LABEL_ORGANIZATION] == "o" * 58 + "-trim"
    assert labels[LABEL_REPOSITORY] == "repo"
    assert all(len(v or "") <= 63 for v in labels.values())


def test_an_unparsable_url_wants_nothing() -> None:
    assert url_labels(_ars("not a url")) == {}


def test_patch_only_when_a_label_differs() -> None:
    wanted = url_labels(_ars("https://github.com/acme/app"))
    current = {LABEL_ORGANIZATION: "acme", LABEL_REPOSITORY: "app", "team": "x"}
    assert not annotations_need_patch(current, wanted)
    assert annotations_need_patch({**current, LABEL_ENTERPRISE: "old"}, wanted)
    assert annotations_need_patch({LABEL_ORGANIZATION: "acme"}, wanted)
