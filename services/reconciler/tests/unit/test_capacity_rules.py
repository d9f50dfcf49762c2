"""The ARS status of the shared capacity, the drain state and the runner gate (ADR 0062)."""

from __future__ import annotations

from typing import Any

from arcflow.common.capacity import ShareReport
from arcflow.common.constants import ANNOTATION_CAPACITY_SHARE
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet
from arcflow.reconciler.controllers.capacity_rules import (
    REASON_DRAINED,
    REASON_DRAINING,
    capacity_status,
    drain_state,
    runners_creatable,
)


def ars(capacity: dict[str, Any] | None = None, **variants: dict[str, Any]) -> AutoscalingRunnerSet:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/o",
        "githubConfigSecret": "s",
        "template": {"spec": {"containers": [{"name": "runner"}]}},
        "runnerVariants": [{"name": n, **v} for n, v in variants.items()],
    }
    if capacity is not None:
        spec["capacity"] = capacity
    return AutoscalingRunnerSet.model_validate(
        {"metadata": {"name": "set", "namespace": "ns"}, "spec": spec}
    )


def ers(variant: str, runners: int, report: ShareReport | None) -> EphemeralRunnerSet:
    annotations = {ANNOTATION_CAPACITY_SHARE: report.encode()} if report else {}
    return EphemeralRunnerSet.model_validate(
        {
            "metadata": {"name": f"set-{variant}", "annotations": annotations},
            "status": {"currentReplicas": runners},
        }
    )


def test_status_lifts_the_reports() -> None:
    report = ShareReport(share=4, advertised=4, used={"runners": "6"}, total={"runners": "6"})
    status = capacity_status(
        ars({"maxRunners": 6}, a={"priority": 2}, b={}),
        [ers("a", 3, report), ers("b", 1, None)],
    )
    assert status is not None
    assert status.model_dump(by_alias=True, exclude_unset=True) == {
        "variants": [
            {"name": "a", "priority": 2, "runners": 3, "drain": False, "share": 4, "advertised": 4},
            {"name": "b", "priority": 0, "runners": 1, "drain": False},
        ],
        "total": {"runners": "6"},
        "used": {"runners": "6"},
    }


def test_no_status_without_capacity_fields() -> None:
    assert capacity_status(ars(None, a={}), [ers("a", 1, None)]) is None
    assert drain_state(ars(None, a={}), [ers("a", 1, None)]) is None


def test_draining_until_the_listener_applied_it_and_no_runner_is_left() -> None:
    spec = ars(None, a={"drain": True}, b={})
    applied = ShareReport(share=1, advertised=0, drain=True)
    state = drain_state(spec, [ers("a", 1, ShareReport(share=3, advertised=3))])
    assert state is not None
    assert state.reason == REASON_DRAINING
    assert "not applied" in state.message
    state = drain_state(spec, [ers("a", 1, applied)])
    assert state is not None
    assert (state.reason, state.message) == (REASON_DRAINING, "variant a: 1 runner(s) left")
    state = drain_state(spec, [ers("a", 0, applied)])
    assert state is not None
    assert state.reason == REASON_DRAINED


def test_the_gate_counts_every_existing_runner() -> None:
    spec = ars({"maxRunners": 6}, a={}, b={})
    assert runners_creatable(spec, "set-a", {"set-a": 2, "set-b": 3}, 5) == 1
    assert runners_creatable(spec, "set-a", {"set-a": 2, "set-b": 4}, 5) == 0
    assert runners_creatable(ars(None, a={}), "set-a", {"set-a": 100}, 5) == 5


def test_the_gate_counts_resources_by_pod_request() -> None:
    big = {"spec": {"containers": [{"name": "runner", "resources": {"requests": {"cpu": "3"}}}]}}
    spec = ars({"resources": {"cpu": "8"}}, a={"template": big}, b={})
    # b's pods request no cpu: only a's count; two of a's exist (6 cpu), 2 cpu are left.
    assert runners_creatable(spec, "set-a", {"set-a": 2, "set-b": 9}, 3) == 0
    assert runners_creatable(spec, "set-b", {"set-a": 2, "set-b": 9}, 3) == 3


def test_counted_runners_win_over_the_paced_status() -> None:
    """The set's status counts are paced (ADR 0033): a fresh set reads 0 there while its runners
    run jobs. Runners counted from the cache decide the drain and the reported runners."""
    spec = ars({"maxRunners": 6}, a={"drain": True}, b={})
    applied = ShareReport(share=0, advertised=0, drain=True)
    stale = [ers("a", 0, applied), ers("b", 0, None)]
    state = drain_state(spec, stale, {"set-a": 2})
    assert state is not None
    assert (state.reason, state.message) == (REASON_DRAINING, "variant a: 2 runner(s) left")
    status = capacity_status(spec, stale, {"set-a": 2})
    assert status is not None
    assert [v.runners for v in status.variants or []] == [2, 0]  # b: not counted, its status
    state = drain_state(spec, stale, {"set-a": 0})
    assert state is not None
    assert state.reason == REASON_DRAINED


def test_room_is_kept_for_a_higher_priority_that_waits() -> None:
    """Room freed in a full budget goes to the highest priority that still wants runners
    (ADR 0090): a lower priority takes none of it while a higher one waits, takes what is left
    over, and equal priorities do not hold each other back."""
    spec = ars({"maxRunners": 6}, a={"priority": 10}, b={}, c={})
    existing = {"set-a": 2, "set-b": 2, "set-c": 0}  # 2 slots free
    assert runners_creatable(spec, "set-b", existing, 5, {"set-a": 3, "set-c": 5}) == 0
    assert runners_creatable(spec, "set-b", existing, 5, {"set-a": 1, "set-c": 5}) == 1
    assert runners_creatable(spec, "set-a", existing, 3, {"set-b": 5, "set-c": 5}) == 2
    assert runners_creatable(spec, "set-c", existing, 5, {"set-a": 0, "set-b": 5}) == 2
