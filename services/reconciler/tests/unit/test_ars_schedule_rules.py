"""``status.effectiveMinRunners`` from the spec and a moment (ADR 0063), pure."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.schedules import parse_time
from arcflow.reconciler.controllers.ars_schedule_rules import (
    BOUNDARY_MARGIN_SECONDS,
    effective_min_runners,
)

TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "r"}]}}
WEEKDAYS = {
    "startTime": "2026-01-05T08:00:00+01:00",
    "endTime": "2026-01-05T18:00:00+01:00",
    "minRunners": 5,
    "recurrenceRule": {"frequency": "Daily"},
}


def _ars(**spec: Any) -> AutoscalingRunnerSet:
    body = {"githubConfigUrl": "https://github.com/a", "githubConfigSecret": "s"}
    body["template"] = TEMPLATE
    body.update(spec)
    return AutoscalingRunnerSet.from_manifest(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": body,
        }
    )


def test_a_set_without_overrides_has_no_status_and_nothing_to_wait_for() -> None:
    assert effective_min_runners(_ars(minRunners=2), parse_time("2026-03-02T10:00:00Z")) == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("now", "minimum", "override", "next_change"),
    [
        ("2026-03-02T06:59:59Z", 1, None, "2026-03-02T07:00:00Z"),
        ("2026-03-02T07:00:00Z", 4, "spec.scheduledOverrides[0]", "2026-03-02T17:00:00Z"),
        ("2026-03-02T17:00:00Z", 1, None, "2026-03-03T07:00:00Z"),
    ],
)
def test_the_default_variant_follows_the_window_capped_by_max(
    now: str, minimum: int, override: str | None, next_change: str
) -> None:
    ars = _ars(minRunners=1, maxRunners=4, scheduledOverrides=[WEEKDAYS])
    entries, wait = effective_min_runners(ars, parse_time(now))
    assert entries is not None
    [entry] = entries
    assert entry.variant == ""
    assert entry.min_runners == minimum
    assert entry.override == (override or "")
    assert entry.next_change == next_change
    expected = (parse_time(next_change) - parse_time(now)).total_seconds()
    assert wait == pytest.approx(expected + BOUNDARY_MARGIN_SECONDS)


def test_every_variant_is_listed_and_the_earliest_boundary_is_the_wait() -> None:
    once = {
        "startTime": "2026-03-02T09:30:00Z",
        "endTime": "2026-03-02T09:45:00Z",
        "minRunners": 1,
    }
    ars = _ars(
        minRunners=1,
        scheduledOverrides=[{**WEEKDAYS, "variants": ["cpu"]}],
        runnerVariants=[
            {"name": "cpu"},
            {"name": "gpu", "template": TEMPLATE, "minRunners": 0, "scheduledOverrides": [once]},
            {"name": "arm", "template": TEMPLATE, "minRunners": 0},
        ],
    )
    entries, wait = effective_min_runners(ars, parse_time("2026-03-02T09:00:00Z"))
    assert entries is not None
    assert [e.model_dump(by_alias=True, exclude_unset=True) for e in entries] == [
        {
            "variant": "cpu",
            "minRunners": 5,
            "override": "spec.scheduledOverrides[0]",
            "nextChange": "2026-03-02T17:00:00Z",
        },
        {"variant": "gpu", "minRunners": 0, "nextChange": "2026-03-02T09:30:00Z"},
        {"variant": "arm", "minRunners": 0},
    ]
    assert wait == pytest.approx(30 * 60 + BOUNDARY_MARGIN_SECONDS)
