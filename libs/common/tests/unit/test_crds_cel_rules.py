"""The CEL rules in the committed CRDs compile and mean what they say.

A real API server is not available here, so the rules are evaluated with cel-python against
the manifests, walking the schema the way the API server does (rule ``self`` = the node).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from arcflow.common.validation import validate_manifest

REPO = Path(__file__).parents[4]
ARS_CRD = REPO / "deploy" / "crds" / "actions.github.com_autoscalingrunnersets.yaml"
EXAMPLES = REPO / "examples"
ENV = celpy.Environment()


def ars_schema() -> dict[str, Any]:
    crd = yaml.safe_load(ARS_CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def violations(schema: dict[str, Any], value: Any, path: str = "") -> list[tuple[str, str]]:
    """``(path, message)`` for every x-kubernetes-validations rule that evaluates to false."""
    found: list[tuple[str, str]] = []
    for rule in schema.get("x-kubernetes-validations", []):
        program = ENV.program(ENV.compile(rule["rule"]))
        if not program.evaluate({"self": celpy.json_to_cel(value)}):
            found.append((path, rule["message"]))
    if isinstance(value, dict):
        for key, child in value.items():
            if key in schema.get("properties", {}):
                found += violations(schema["properties"][key], child, f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += violations(schema["items"], item, f"{path}[{index}]")
    return found


def variants_example() -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / "02-runner-variants.yaml").read_text())
    assert isinstance(doc, dict)
    return copy.deepcopy(doc)


def test_the_rules_exist_and_compile() -> None:
    schema = ars_schema()
    variants = schema["properties"]["spec"]["properties"]["runnerVariants"]
    rules = [*variants["x-kubernetes-validations"], *variants["items"]["x-kubernetes-validations"]]
    assert len(rules) == 2
    for rule in rules:
        ENV.compile(rule["rule"])


@pytest.mark.parametrize(
    "name", ["01-single-scale-set.yaml", "02-runner-variants.yaml", "04-scheduled-minimums.yaml"]
)
def test_examples_pass_every_rule(name: str) -> None:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert violations(ars_schema(), doc) == []


def test_duplicate_variant_names_are_rejected() -> None:
    doc = variants_example()
    doc["spec"]["runnerVariants"][2]["name"] = "cpu-small"
    assert violations(ars_schema(), doc) == [
        (".spec.runnerVariants", "variant names must be unique")
    ]


def test_variant_min_above_max_is_rejected() -> None:
    doc = variants_example()
    doc["spec"]["runnerVariants"][1]["minRunners"] = 5  # maxRunners is 4
    assert violations(ars_schema(), doc) == [
        (".spec.runnerVariants[1]", "maxRunners must be greater than or equal to minRunners")
    ]


def test_variant_with_only_one_bound_passes_the_cel_rule() -> None:
    """Inherited bounds are checked by arcflow's validation, not by the per-item CEL rule."""
    doc = variants_example()
    doc["spec"]["runnerVariants"][0] = {"name": "cpu-small", "minRunners": 50}
    assert violations(ars_schema(), doc) == []


# --- scheduledOverrides (ADR 0063): the same problems named by arcflow validate ----------

WINDOW = {"startTime": "2026-01-05T09:00:00+02:00", "endTime": "2026-01-05T17:00:00+02:00"}


def with_overrides(items: list[dict[str, Any]]) -> dict[str, Any]:
    doc = variants_example()
    doc["spec"]["scheduledOverrides"] = items
    return doc


def test_a_valid_schedule_passes_both() -> None:
    doc = with_overrides(
        [
            {**WINDOW, "minRunners": 2, "recurrenceRule": {"frequency": "Daily"}},
            {**WINDOW, "minRunners": 1, "variants": ["gpu"]},
        ]
    )
    doc["spec"]["runnerVariants"][0]["scheduledOverrides"] = []
    assert violations(ars_schema(), doc) == []
    assert validate_manifest(doc) == []


@pytest.mark.parametrize(
    ("item", "server_path", "arcflow_path", "rule"),
    [
        (
            {"startTime": WINDOW["endTime"], "endTime": WINDOW["startTime"], "minRunners": 1},
            ".spec.scheduledOverrides[0]",
            "spec.scheduledOverrides[0].endTime",
            "endTime must be after startTime",
        ),
        (
            # Same instant in two offsets: not after.
            {
                "startTime": "2026-01-05T09:00:00+02:00",
                "endTime": "2026-01-05T07:00:00Z",
                "minRunners": 1,
            },
            ".spec.scheduledOverrides[0]",
            "spec.scheduledOverrides[0].endTime",
            "endTime must be after startTime",
        ),
        (
            {
                "startTime": "2026-01-05T09:00:00Z",
                "endTime": "2026-01-12T09:00:01Z",
                "minRunners": 1,
                "recurrenceRule": {"frequency": "Weekly"},
            },
            ".spec.scheduledOverrides[0]",
            "spec.scheduledOverrides[0].endTime",
            "may last at most one period of its frequency",
        ),
        (
            {**WINDOW, "minRunners": 1, "variants": ["cpu-small", "nope"]},
            ".spec",
            "spec.scheduledOverrides[0].variants[1]",
            "names a variant that is not in spec.runnerVariants",
        ),
    ],
    ids=["ends-before-start", "same-instant", "longer-than-period", "unknown-variant"],
)
def test_bad_overrides_break_the_same_rule_in_both(
    item: dict[str, Any], server_path: str, arcflow_path: str, rule: str
) -> None:
    doc = with_overrides([item])
    found = violations(ars_schema(), doc)
    assert [path for path, message in found if rule in message] == [server_path], found
    ours = [e for e in validate_manifest(doc) if e.path == arcflow_path]
    assert ours, validate_manifest(doc)
    assert all(rule in e.message for e in ours), ours


def test_naming_variants_without_runner_variants_is_refused() -> None:
    doc = with_overrides([{**WINDOW, "minRunners": 1, "variants": ["gpu"]}])
    del doc["spec"]["runnerVariants"]
    doc["spec"]["template"] = {"spec": {"containers": [{"name": "runner", "image": "r"}]}}
    rule = "names a variant that is not in spec.runnerVariants"
    assert [p for p, m in violations(ars_schema(), doc) if rule in m] == [".spec"]
    [ours] = validate_manifest(doc)
    assert ours.path == "spec.scheduledOverrides[0].variants[0]"
    assert "the set has no runnerVariants" in ours.message
