"""The budget a set takes from its namespace's ResourceQuotas (ADR 0062, docs/models.md)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from arcflow.common.builders.capacity import set_capacity_of
from arcflow.common.models import AutoscalingRunnerSet, ResourceQuota
from arcflow.reconciler.controllers.quota_rules import (
    quota_limits,
    uses_resource_quota,
    with_quota_budget,
)
from arcflow.reconciler.routing import sets_using_quota


def ars(capacity: dict[str, Any] | None) -> AutoscalingRunnerSet:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/o",
        "githubConfigSecret": "s",
        "template": {
            "spec": {"containers": [{"name": "runner", "resources": {"requests": {"cpu": "1"}}}]}
        },
    }
    if capacity is not None:
        spec["capacity"] = capacity
    return AutoscalingRunnerSet.model_validate(
        {"metadata": {"name": "set", "namespace": "ns"}, "spec": spec}
    )


def quota(**hard: str) -> ResourceQuota:
    return ResourceQuota.model_validate(
        {"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": hard}}
    )


def test_requests_and_pods_become_the_budget() -> None:
    hard = {
        "requests.cpu": "4",
        "memory": "8Gi",
        "requests.nvidia.com/gpu": "2",
        "pods": "3",
        "limits.cpu": "100",
        "count/secrets": "5",
    }
    pods, resources = quota_limits([quota(**hard)])
    assert pods == 3
    assert resources == {
        "cpu": Fraction(4),
        "memory": Fraction(8 * 2**30),
        "nvidia.com/gpu": Fraction(2),
    }


def test_the_tightest_quota_and_explicit_value_win() -> None:
    quotas = [quota(**{"requests.cpu": "4", "pods": "10"}), quota(cpu="6", pods="3")]
    budget = with_quota_budget(
        ars({"fromResourceQuota": True, "maxRunners": 5, "resources": {"cpu": "2"}}), quotas
    )
    assert budget.spec.capacity is not None
    assert budget.spec.capacity.max_runners == 3
    assert budget.spec.capacity.resources == {"cpu": "2"}
    looser = with_quota_budget(
        ars({"fromResourceQuota": True, "maxRunners": 2, "resources": {"cpu": "8"}}), quotas
    )
    assert looser.spec.capacity is not None
    assert looser.spec.capacity.max_runners == 2
    assert looser.spec.capacity.resources == {"cpu": "4"}


def test_the_listener_capacity_carries_the_quota() -> None:
    built = set_capacity_of(
        with_quota_budget(ars({"fromResourceQuota": True}), [quota(**{"requests.cpu": "4"})])
    )
    assert built is not None
    assert built.resources == {"cpu": "4"}
    assert built.max_runners is None
    assert [v.pod_request for v in built.variants.values()] == [{"cpu": "1"}]


def test_without_the_flag_nothing_changes() -> None:
    quotas = [quota(pods="1", cpu="1")]
    for capacity in (None, {"maxRunners": 5}, {"fromResourceQuota": False}):
        plain = ars(capacity)
        assert not uses_resource_quota(plain)
        assert with_quota_budget(plain, quotas) is plain


def test_no_quota_leaves_the_explicit_budget() -> None:
    set_ = ars({"fromResourceQuota": True, "maxRunners": 4})
    budget = with_quota_budget(set_, [])
    assert budget.spec.capacity is not None
    assert budget.spec.capacity.max_runners == 4
    assert budget.spec.capacity.resources is None


def test_a_quota_change_routes_to_the_sets_that_use_it() -> None:
    sets = [
        {"metadata": {"name": "a"}, "spec": {"capacity": {"fromResourceQuota": True}}},
        {"metadata": {"name": "b"}, "spec": {"capacity": {"maxRunners": 2}}},
        {"metadata": {"name": "c"}, "spec": {}},
    ]

    class Lookup:
        home_namespace = "ctl"

        def objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
            assert (kind, namespace) == ("AutoscalingRunnerSet", "ns")
            return sets

    quota = {"metadata": {"name": "q", "namespace": "ns"}}
    assert sets_using_quota(quota, Lookup()) == [("ns", "a")]
