"""Pure decisions: version gate, outdated loop guard, pod-create errors, JIT claims, names,
the reconciler's Kubernetes client rate defaults."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from arcflow.common.kube import (
    ConflictError,
    ForbiddenError,
    InvalidError,
    KubeApiError,
    KubeSettings,
    NotFoundError,
)
from arcflow.reconciler.controllers.runner_claims import (
    ANNOTATION_JIT_CLAIM,
    ANNOTATION_REQUEST_OWED,
    ANNOTATION_RUNNER_CLAIM,
    OwedRunners,
    RunnerClaim,
    in_flight_runners,
    jit_claim_holder,
    parse_owed_runners,
    parse_runner_claim,
    runner_name,
)
from arcflow.reconciler.controllers.runner_rules import backoff_remaining, pod_create_decision
from arcflow.reconciler.settings import reconciler_kube_settings


def _err(cls: type[KubeApiError], message: str, reason: str = "") -> KubeApiError:
    return cls(message, status=0, reason=reason)


def test_pod_create_decision() -> None:
    exists = pod_create_decision(_err(ConflictError, "exists", "AlreadyExists"), 0)
    assert (exists.action, exists.requeue_after) == ("requeue", 5.0)

    invalid = pod_create_decision(_err(InvalidError, "spec.containers: Required value"), 0)
    assert invalid.action == "mark_invalid"
    assert invalid.remove_runner
    assert invalid.message == "Failed to create the pod: spec.containers: Required value"

    quota = 'pods "x" is forbidden: exceeded quota: compute, requested: cpu=2'
    young = pod_create_decision(_err(ForbiddenError, quota), 599)
    assert (young.action, young.requeue_after) == ("requeue", 30.0)
    assert pod_create_decision(_err(ForbiddenError, quota), 601).action == "delete_runner"

    psp = pod_create_decision(_err(ForbiddenError, "violates PodSecurity restricted"), 0)
    assert psp.action == "mark_invalid"
    assert not psp.remove_runner

    # The ServiceAccount admission plugin: the account is not there yet; it will be.
    for missing in (
        'pods "x" is forbidden: error looking up service account ns/default: '
        'serviceaccount "default" not found',
        'pods "x" is forbidden: serviceaccount "builder" not found',
    ):
        assert pod_create_decision(_err(ForbiddenError, missing), 0).action == "retry"

    with pytest.raises(NotFoundError):
        pod_create_decision(_err(NotFoundError, "namespace gone"), 0)
    with pytest.raises(ConflictError):  # a stale write is not a refusal: re-read and retry
        pod_create_decision(_err(ConflictError, "stale", "Conflict"), 0)


def test_failure_backoff_table_is_injectable() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    failures = {"a": "2026-01-01T00:00:09Z", "b": "2026-01-01T00:00:05Z"}
    assert backoff_remaining(failures, now) == 9.0  # 2 failures -> 10 s after the last
    assert backoff_remaining(failures, now, (0, 0, 0)) == 0.0
    many = {str(i): "2026-01-01T00:00:10Z" for i in range(9)}
    assert backoff_remaining(many, now) == 80.0  # capped at the table's end


def test_jit_claim_holder() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    fresh = {ANNOTATION_JIT_CLAIM: f"r-1@{now.timestamp() - 5}"}
    stale = {ANNOTATION_JIT_CLAIM: f"r-1@{now.timestamp() - 31}"}
    assert jit_claim_holder(fresh, now) == "r-1"
    assert jit_claim_holder(stale, now) is None
    assert jit_claim_holder({}, now) is None
    assert jit_claim_holder({ANNOTATION_JIT_CLAIM: "x@y"}, now) is None


def test_runner_names_come_from_a_counter_and_claims_count_in_flight_runners() -> None:
    names = [runner_name("solo-runner-", "uid-1", i) for i in range(50)]
    assert len(set(names)) == 50  # never reused while the counter grows
    assert all(n.startswith("solo-runner-") and len(n) == len("solo-runner-") + 5 for n in names)
    assert runner_name("solo-runner-", "uid-2", 0) != names[0]

    claim = RunnerClaim(3, tuple(names[:3]), "r-a", 100.0)
    assert parse_runner_claim({ANNOTATION_RUNNER_CLAIM: claim.encode()}) == claim
    assert parse_runner_claim({ANNOTATION_RUNNER_CLAIM: "{"}) == RunnerClaim()
    # another replica claimed 3 names 2 s ago and created one: 2 are still on their way
    assert in_flight_runners(claim, {names[0]}, "r-b", 102.0) == 2
    assert in_flight_runners(claim, {names[0]}, "r-a", 102.0) == 0  # my own finished pass
    assert in_flight_runners(claim, set(), "r-b", 111.0) == 0  # stale claim


def test_what_a_short_request_owes_belongs_to_that_request_only() -> None:
    owed = OwedRunners(patch_id=5, replicas=4, owed=2)
    assert parse_owed_runners({ANNOTATION_REQUEST_OWED: owed.encode()}) == owed
    assert owed.of(5, 4) == 2
    assert owed.of(6, 4) is None  # a new request replaces it
    assert owed.of(5, 3) is None  # the same patchID with another count is not that request
    assert owed.of(0, 4) is None  # a forced request is evaluated afresh every pass
    assert OwedRunners(5, 4, 0).of(5, 4) is None  # nothing left: served
    for raw in ("{", "[]", '{"patch": 5}', '{"patch": "x", "replicas": 4, "owed": 1}', ""):
        assert parse_owed_runners({ANNOTATION_REQUEST_OWED: raw}) is None
    assert parse_owed_runners({}) is None


def test_reconciler_kube_rate_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ARCFLOW_KUBE_QPS", "ARCFLOW_KUBE_BURST"):
        monkeypatch.delenv(var, raising=False)
    assert (KubeSettings().qps, KubeSettings().burst) == (20.0, 40)  # shared default kept
    settings = reconciler_kube_settings()
    assert (settings.qps, settings.burst) == (200.0, 400)
    monkeypatch.setenv("ARCFLOW_KUBE_QPS", "7")
    settings = reconciler_kube_settings()
    assert (settings.qps, settings.burst) == (7.0, 400)
    monkeypatch.setenv("ARCFLOW_KUBE_BURST", "9")
    assert reconciler_kube_settings().burst == 9
