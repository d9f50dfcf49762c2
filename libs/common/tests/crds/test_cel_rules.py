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


@pytest.mark.parametrize("name", ["01-single-scale-set.yaml", "02-runner-variants.yaml"])
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
