"""Effective variants: per-field fallbacks, declared order, and max unset -> MaxInt32 (spec §8)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common.constants import UNBOUNDED_MAX_RUNNERS
from arcflow.common.models import (
    AutoscalingRunnerSetSpec,
    EffectiveVariant,
    RunnerVariant,
    effective_variants,
    is_multi_variant,
)

TOP_TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "top"}]}}
GPU_TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "gpu"}]}}


def spec_of(**fields: Any) -> AutoscalingRunnerSetSpec:
    return AutoscalingRunnerSetSpec.model_validate(fields)


def test_no_variants_gives_one_default_variant_from_the_top_level() -> None:
    spec = spec_of(
        runnerScaleSetLabels=["linux"], template=TOP_TEMPLATE, minRunners=1, maxRunners=3
    )
    [variant] = effective_variants(spec)
    assert variant == EffectiveVariant(
        name="",
        runner_scale_set_labels=["linux"],
        template=TOP_TEMPLATE,
        min_runners=1,
        max_runners=3,
    )
    assert variant.is_default
    assert not is_multi_variant(spec)


def test_no_variants_and_nothing_set_means_zero_to_unbounded() -> None:
    [variant] = effective_variants(spec_of())
    assert (variant.min_runners, variant.max_runners) == (0, UNBOUNDED_MAX_RUNNERS)
    assert variant.runner_scale_set_labels == []
    assert variant.template == {}


def test_empty_variant_list_is_the_single_set_path() -> None:
    spec = spec_of(runnerVariants=[])
    assert not is_multi_variant(spec)
    assert [v.name for v in effective_variants(spec)] == [""]


def test_one_named_variant_is_multi_variant() -> None:
    spec = spec_of(runnerVariants=[{"name": "only"}])
    assert is_multi_variant(spec)
    [variant] = effective_variants(spec)
    assert variant.name == "only"
    assert not variant.is_default


def test_per_field_fallbacks() -> None:
    spec = spec_of(
        runnerScaleSetLabels=["linux"],
        template=TOP_TEMPLATE,
        minRunners=1,
        maxRunners=10,
        runnerVariants=[
            {"name": "inherit"},
            {"name": "no-labels", "runnerScaleSetLabels": []},
            {
                "name": "gpu",
                "runnerScaleSetLabels": ["gpu"],
                "template": GPU_TEMPLATE,
                "minRunners": 0,
                "maxRunners": 2,
            },
        ],
    )
    inherit, no_labels, gpu = effective_variants(spec)
    assert inherit == EffectiveVariant("inherit", ["linux"], TOP_TEMPLATE, 1, 10)
    assert no_labels.runner_scale_set_labels == []
    assert (no_labels.min_runners, no_labels.max_runners) == (1, 10)
    assert gpu == EffectiveVariant("gpu", ["gpu"], GPU_TEMPLATE, 0, 2)


def test_max_unset_everywhere_is_unbounded_for_every_variant_not_zero() -> None:
    spec = spec_of(runnerVariants=[{"name": "a"}, {"name": "b", "minRunners": 2}, {"name": "c"}])
    assert [v.max_runners for v in effective_variants(spec)] == [UNBOUNDED_MAX_RUNNERS] * 3
    assert [v.min_runners for v in effective_variants(spec)] == [0, 2, 0]


def test_explicit_zero_max_is_kept() -> None:
    spec = spec_of(maxRunners=5, runnerVariants=[{"name": "off", "maxRunners": 0}])
    assert effective_variants(spec)[0].max_runners == 0


def test_method_and_function_agree() -> None:
    spec = spec_of(runnerVariants=[{"name": "a"}, {"name": "b"}])
    assert spec.effective_variants() == effective_variants(spec)


def test_results_are_copies_callers_may_mutate() -> None:
    spec = spec_of(
        runnerScaleSetLabels=["linux"], template=TOP_TEMPLATE, runnerVariants=[{"name": "a"}]
    )
    [variant] = effective_variants(spec)
    variant.template["spec"]["containers"][0]["image"] = "mutated"
    variant.runner_scale_set_labels.append("extra")
    assert spec.template["spec"]["containers"][0]["image"] == "top"
    assert spec.runner_scale_set_labels == ["linux"]


def test_effective_variant_is_frozen() -> None:
    variant = effective_variants(spec_of())[0]
    with pytest.raises(AttributeError):
        variant.max_runners = 1  # type: ignore[misc]


optional_count = st.none() | st.integers(min_value=0, max_value=1000)
optional_labels = st.none() | st.lists(st.text(min_size=1, max_size=5), max_size=3)
variant_strategy = st.builds(
    RunnerVariant,
    name=st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
    runner_scale_set_labels=optional_labels,
    min_runners=optional_count,
    max_runners=optional_count,
)


@given(
    variants=st.lists(variant_strategy, min_size=1, max_size=8),
    top_min=optional_count,
    top_max=optional_count,
    top_labels=optional_labels,
)
def test_property_order_and_max_fallback(
    variants: list[RunnerVariant],
    top_min: int | None,
    top_max: int | None,
    top_labels: list[str] | None,
) -> None:
    spec = AutoscalingRunnerSetSpec(
        runner_variants=variants,
        min_runners=top_min,
        max_runners=top_max,
        runner_scale_set_labels=top_labels,
    )
    resolved = effective_variants(spec)
    assert [v.name for v in resolved] == [v.name for v in variants]
    for declared, effective in zip(variants, resolved, strict=True):
        if declared.max_runners is None and top_max is None:
            assert effective.max_runners == UNBOUNDED_MAX_RUNNERS
        expected_max = declared.max_runners if declared.max_runners is not None else top_max
        if expected_max is not None:
            assert effective.max_runners == expected_max
        expected_min = declared.min_runners if declared.min_runners is not None else top_min
        assert effective.min_runners == (expected_min or 0)
        if declared.runner_scale_set_labels is None:
            assert effective.runner_scale_set_labels == (top_labels or [])
        else:
            assert effective.runner_scale_set_labels == declared.runner_scale_set_labels
