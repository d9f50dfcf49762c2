"""The allocation rule of ADR 0062: examples, then properties over random sets."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from arcflow.listener.allocation import (
    RUNNERS,
    Budget,
    VariantDemand,
    advertised,
    allocate,
)


def demand(name: str, **kw: object) -> VariantDemand:
    return VariantDemand(name=name, **kw)  # type: ignore[arg-type]


def test_higher_priority_takes_a_short_budget_first() -> None:
    result = allocate(
        [
            demand("low", priority=1, assigned=0, available=10),
            demand("high", priority=5, assigned=0, available=10),
        ],
        Budget(max_runners=6),
    )
    assert result.shares == {"low": 0, "high": 6}
    assert result.used[RUNNERS] == 6


def test_committed_jobs_stay_whatever_the_priority() -> None:
    result = allocate(
        [
            demand("low", priority=1, assigned=4, available=10),
            demand("high", priority=5, assigned=0, available=10),
        ],
        Budget(max_runners=6),
    )
    assert result.shares == {"low": 4, "high": 2}


def test_equal_priorities_split_in_proportion_to_demand() -> None:
    result = allocate(
        [demand("a", available=30), demand("b", available=10)],
        Budget(max_runners=8),
    )
    assert result.shares == {"a": 6, "b": 2}


def test_demand_below_budget_gets_all_and_headroom_goes_round_robin() -> None:
    result = allocate(
        [demand("a", available=1, max_runners=3), demand("b"), demand("c", priority=2)],
        Budget(max_runners=6),
    )
    # a's demand 1 first; then 5 of headroom one at a time: c (priority 2), a, b, c, a.
    assert result.shares == {"a": 3, "b": 1, "c": 2}
    assert sum(result.shares.values()) == 6


def test_min_runners_are_demand() -> None:
    result = allocate(
        [demand("a", min_runners=2), demand("b", priority=1, available=9)],
        Budget(max_runners=4),
    )
    assert result.shares == {"a": 0, "b": 4}


def test_resources_counted_per_pod() -> None:
    big = {"cpu": Fraction(8), "memory": Fraction(32 * 2**30)}
    small = {"cpu": Fraction(2), "memory": Fraction(4 * 2**30)}
    gpu = {"cpu": Fraction(4), "nvidia.com/gpu": Fraction(1)}
    result = allocate(
        [
            demand("big", pod_request=big, available=10),
            demand("small", pod_request=small, available=10),
            demand("gpu", pod_request=gpu, priority=9, available=10),
        ],
        Budget(resources={"cpu": Fraction(24), "nvidia.com/gpu": Fraction(2)}),
    )
    # gpu first (priority 9): 2 pods by its gpu limit, 8 cpu; 16 cpu left for big and
    # small in proportion to demand (10 each): big 8 + small 2 + small 2 + ... fits 16.
    assert result.shares["gpu"] == 2
    cpu = 8 * result.shares["big"] + 2 * result.shares["small"] + 4 * result.shares["gpu"]
    assert cpu <= 24
    assert result.used["cpu"] == cpu
    assert result.shares["big"] >= 1
    assert result.shares["small"] >= 1


def test_a_pod_requesting_no_budgeted_resource_is_not_bounded() -> None:
    result = allocate(
        [demand("cpu-only", pod_request={"cpu": Fraction(1)}, max_runners=50, available=3)],
        Budget(resources={"nvidia.com/gpu": Fraction(8)}),
    )
    assert result.shares == {"cpu-only": 50}


def test_drained_variant_keeps_only_its_committed_jobs_and_advertises_zero() -> None:
    drained = demand("d", drain=True, assigned=2, available=5, min_runners=1)
    result = allocate([drained, demand("e", available=9)], Budget(max_runners=6))
    assert result.shares == {"d": 2, "e": 4}
    assert advertised(drained, result.shares["d"]) == 0


def test_budget_lowered_under_running_jobs() -> None:
    result = allocate(
        [demand("a", assigned=5), demand("b", assigned=3, available=2)], Budget(max_runners=6)
    )
    assert result.overcommitted
    assert result.shares == {"a": 5, "b": 3}


def test_no_budget_means_every_variant_its_own_max() -> None:
    result = allocate([demand("a", max_runners=7), demand("b")], Budget())
    assert result.shares == {"a": 7, "b": 2**31 - 1}


# --- properties ----------------------------------------------------------------------------

variant_st = st.builds(
    VariantDemand,
    name=st.just(""),
    priority=st.integers(-3, 3),
    min_runners=st.integers(0, 3),
    max_runners=st.integers(0, 30),
    drain=st.booleans(),
    assigned=st.integers(0, 12),
    available=st.integers(0, 25),
)


def named(variants: list[VariantDemand]) -> list[VariantDemand]:
    return [
        VariantDemand(**{**v.__dict__, "name": f"v{i}"})  # type: ignore[arg-type]
        for i, v in enumerate(variants)
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(variant_st, min_size=1, max_size=6), st.integers(0, 40))
def test_shares_never_exceed_the_budget_unless_committed_does(
    raw: list[VariantDemand], budget: int
) -> None:
    variants = named(raw)
    result = allocate(variants, Budget(max_runners=budget))
    committed = sum(v.committed for v in variants)
    if committed <= budget:
        assert sum(result.shares.values()) <= budget
        assert not result.overcommitted
    else:
        assert result.shares == {v.name: v.committed for v in variants}
    for v in variants:
        assert v.committed <= result.shares[v.name] <= max(v.max_runners, v.committed)
        if v.drain:
            assert result.shares[v.name] == v.committed


@settings(max_examples=300, deadline=None)
@given(st.lists(variant_st, min_size=1, max_size=6), st.integers(0, 40))
def test_demand_within_the_budget_is_met_in_full(raw: list[VariantDemand], budget: int) -> None:
    variants = named(raw)
    result = allocate(variants, Budget(max_runners=budget))
    if sum(v.wanted for v in variants) <= budget:
        for v in variants:
            assert result.shares[v.name] >= v.wanted


@settings(max_examples=300, deadline=None)
@given(st.lists(variant_st, min_size=2, max_size=6), st.integers(0, 40))
def test_a_lower_priority_gets_demand_only_when_higher_ones_are_met(
    raw: list[VariantDemand], budget: int
) -> None:
    variants = [VariantDemand(**{**v.__dict__, "drain": False}) for v in named(raw)]
    result = allocate(variants, Budget(max_runners=budget))
    for high in variants:
        if result.shares[high.name] >= high.wanted:
            continue  # met
        for low in variants:
            if low.priority < high.priority:
                # An unmet higher variant: the lower one has its committed jobs only.
                assert result.shares[low.name] == low.committed


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 40), min_size=2, max_size=6),
    st.integers(0, 60),
)
def test_equal_priorities_split_within_one_runner_of_proportional(
    wants: list[int], budget: int
) -> None:
    variants = [
        VariantDemand(name=f"v{i}", available=w, max_runners=100) for i, w in enumerate(wants)
    ]
    result = allocate(variants, Budget(max_runners=budget))
    total = sum(wants)
    if budget >= total:
        return
    for v, want in zip(variants, wants, strict=True):
        exact = Fraction(budget * want, total)
        assert abs(result.shares[v.name] - exact) < 1, (wants, budget, result.shares)
