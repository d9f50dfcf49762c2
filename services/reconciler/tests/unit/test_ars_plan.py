"""What an ARS pass derives from the ARS alone is kept per version of it (ADR 0128)."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.builders import BuildError, BuildSettings, desired_runner_sets
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.controllers.ars_plan import ArsPlans

SETTINGS = BuildSettings(controller_namespace="arc-systems", listener_image="listener:1")
TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "r"}]}}


def _ars(version: str, *, uid: str = "u1", variants: int = 3, **extra: Any) -> AutoscalingRunnerSet:
    spec: dict[str, Any] = {
        "githubConfigUrl": "https://github.com/o/r",
        "githubConfigSecret": "s",
        "template": TEMPLATE,
        "runnerVariants": [{"name": f"v{i}"} for i in range(variants)],
    }
    spec.update(extra)
    return AutoscalingRunnerSet.from_observed(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "a", "namespace": "n", "uid": uid, "resourceVersion": version},
            "spec": spec,
        }
    )


def _ids(ars: AutoscalingRunnerSet, first: int = 1) -> dict[str, int]:
    return {v.name: first + i for i, v in enumerate(ars.spec.effective_variants())}


def test_one_version_is_derived_once_whatever_the_passes() -> None:
    plans = ArsPlans()
    ars = _ars("10")
    for _ in range(5):
        plan = plans.plan(ars)
        runner_sets, scale_sets = plans.children(_ars("10"), _ids(ars), SETTINGS)
    assert plans.derived == 2  # the problems and variants, then the children
    assert plan.variants == ["v0", "v1", "v2"]
    assert runner_sets == desired_runner_sets(ars, _ids(ars), SETTINGS)
    assert [s.variant_name for s in scale_sets or []] == ["v0", "v1", "v2"]


def test_a_new_version_a_new_uid_or_new_ids_derive_again() -> None:
    plans = ArsPlans()
    first, _ = plans.children(_ars("10"), _ids(_ars("10")), SETTINGS)
    assert plans.derived == 2
    # New ids (the registrar registered a variant again): the children are built again.
    again, _ = plans.children(_ars("10"), _ids(_ars("10"), first=7), SETTINGS)
    assert plans.derived == 3
    assert again != first
    # A new version with a fourth variant: everything again, and it shows.
    grown = _ars("11", variants=4)
    assert plans.plan(grown).variants == ["v0", "v1", "v2", "v3"]
    assert len(plans.children(grown, _ids(grown), SETTINGS)[0]) == 4
    assert plans.derived == 5
    # The same name and version under another uid (deleted and made again): not the same ARS.
    assert plans.plan(_ars("11", uid="u2", variants=2)).variants == ["v0", "v1"]


def test_an_object_without_a_version_is_never_taken_for_a_kept_one() -> None:
    plans = ArsPlans()
    plans.plan(_ars(""))
    plans.plan(_ars(""))
    assert plans.derived == 2


def test_problems_are_kept_with_their_version() -> None:
    plans = ArsPlans()
    bad = _ars("10", minRunners=5, maxRunners=2)
    assert plans.plan(bad).problems
    assert not plans.plan(_ars("11")).problems


def test_a_build_error_is_raised_again_on_every_pass_and_nothing_is_kept() -> None:
    plans = ArsPlans()
    ars = _ars("10")
    ids = _ids(ars)
    del ids["v1"]
    for _ in range(2):
        with pytest.raises(BuildError):
            plans.children(ars, ids, SETTINGS)
    assert plans.plan(ars).ids is None


def test_forget_drops_the_kept_version() -> None:
    plans = ArsPlans()
    plans.plan(_ars("10"))
    plans.forget("n", "a")
    plans.plan(_ars("10"))
    assert plans.derived == 2
