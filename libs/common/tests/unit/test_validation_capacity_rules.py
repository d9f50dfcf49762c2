"""spec.capacity, priority and drain (ADR 0062): bad values, their paths and messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arcflow.common.validation import validate_manifest

VALID: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "AutoscalingRunnerSet",
    "metadata": {"name": "arc", "namespace": "arc-runners"},
    "spec": {
        "githubConfigUrl": "https://github.com/example-org",
        "githubConfigSecret": "arc-github-secret",
        "template": {"spec": {"containers": [{"name": "runner"}]}},
        "capacity": {"maxRunners": 6, "resources": {"cpu": "96", "memory": "384Gi"}},
        "runnerVariants": [
            {"name": "cpu", "priority": 5},
            {"name": "gpu", "drain": True},
        ],
    },
}


def check(change: dict[str, Any]) -> list[str]:
    doc = copy.deepcopy(VALID)
    for key, value in change.items():
        node: Any = doc["spec"]
        *parents, last = key.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value
    return [str(e) for e in validate_manifest(doc)]


def test_valid_passes() -> None:
    assert check({}) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"capacity.resources.cpu": "-1"},
            "spec.capacity.resources[cpu]: must be a non-negative quantity such as 96, 500m",
        ),
        (
            {"capacity.resources.memory": "lots"},
            "spec.capacity.resources[memory]: must be a non-negative quantity",
        ),
        (
            {"capacity.resources.cpu": 1.5},
            "spec.capacity.resources.cpu: must be a non-negative quantity",
        ),
        ({"capacity.maxRunners": -2}, "spec.capacity.maxRunners: is -2; it must be greater"),
        (
            {"runnerVariants.0.priority": "high"},
            "spec.runnerVariants[0].priority: input should be a valid integer",
        ),
        (
            {"runnerVariants.0.priority": 1.5},
            "spec.runnerVariants[0].priority: input should be a valid integer",
        ),
        ({"drain": "yes"}, "spec.drain: input should be a valid boolean"),
        (
            {
                "runnerVariants.1.template": {
                    "spec": {
                        "containers": [{"name": "runner", "resources": {"requests": {"cpu": "x"}}}]
                    }
                }
            },
            "spec.runnerVariants[1].template: a container resource request cannot be counted",
        ),
    ],
)
def test_bad_values_are_named(change: dict[str, Any], expected: str) -> None:
    problems = check(change)
    assert any(p.startswith(expected) for p in problems), problems


def test_template_quantities_matter_only_with_a_resource_budget() -> None:
    bad = {"spec": {"containers": [{"name": "runner", "resources": {"requests": {"cpu": "x"}}}]}}
    assert check({"capacity": {"maxRunners": 3}, "runnerVariants.1.template": bad}) == []
