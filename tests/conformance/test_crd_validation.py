"""The CRDs of ``deploy/crds`` are the real validators: the real server refuses what their
structural schema and CEL rules refuse, and ``arcflow validate`` says the same thing about it.

The emulator validates no schema (a documented difference), so these run on the real server
only. Each case compares the server's causes with ``validate_manifest``'s errors: the field
the server names is the one arcflow names, or the object holding it (a CEL rule on a list or
an item names the list or the item), and both messages carry the same rule text.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, InvalidError
from arcflow.common.validation import validate_manifest
from tests.conformance.conftest import Backend
from tests.conformance.helpers import apiserver_only

pytestmark = [pytest.mark.integration, apiserver_only]

EXAMPLES = Path(__file__).parents[2] / "examples"
Doc = dict[str, Any]


def _variants(namespace: str, name: str) -> Doc:
    doc = yaml.safe_load((EXAMPLES / "02-runner-variants.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": name, "namespace": namespace}
    return doc


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        node: Any = doc["spec"]
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        last = parts[-1]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return change


_DELETE = object()
_WINDOW = {
    "startTime": "2026-01-05T09:00:00+02:00",
    "endTime": "2026-01-05T17:00:00+02:00",
    "minRunners": 2,
}


def _duplicate_names(doc: Doc) -> None:
    doc["spec"]["runnerVariants"][1]["name"] = doc["spec"]["runnerVariants"][0]["name"]


# (id, change, arcflow's path, the server's field, a rule text both messages carry)
CASES: list[tuple[str, Callable[[Doc], None], str, str, str]] = [
    (
        "negative-min",
        _set("minRunners", -1),
        "spec.minRunners",
        "spec.minRunners",
        "greater than or equal to 0",
    ),
    (
        "negative-variant-max",
        _set("runnerVariants.0.maxRunners", -2),
        "spec.runnerVariants[0].maxRunners",
        "spec.runnerVariants[0].maxRunners",
        "greater than or equal to 0",
    ),
    (
        "variant-without-name",
        _set("runnerVariants.0.name", _DELETE),
        "spec.runnerVariants[0].name",
        "spec.runnerVariants[0].name",
        "required",
    ),
    (
        "string-for-integer",
        _set("maxRunners", "5"),
        "spec.maxRunners",
        "spec.maxRunners",
        "integer",
    ),
    # CEL on the item with a fieldPath: both name the field.
    (
        "variant-min-above-max",
        _set("runnerVariants.1.minRunners", 5),
        "spec.runnerVariants[1].maxRunners",
        "spec.runnerVariants[1].maxRunners",
        "maxRunners must be greater than or equal to minRunners",
    ),
    # Shared capacity (ADR 0062): the CEL rule on each quantity and the integer priority.
    (
        "negative-capacity-quantity",
        _set("capacity", {"resources": {"cpu": "-1"}}),
        "spec.capacity.resources[cpu]",
        "spec.capacity.resources[cpu]",
        "must be a non-negative quantity",
    ),
    (
        "unparsable-capacity-quantity",
        _set("capacity", {"resources": {"memory": "lots"}}),
        "spec.capacity.resources[memory]",
        "spec.capacity.resources[memory]",
        "must be a non-negative quantity",
    ),
    (
        "negative-capacity-max",
        _set("capacity", {"maxRunners": -1}),
        "spec.capacity.maxRunners",
        "spec.capacity.maxRunners",
        "greater than or equal to 0",
    ),
    (
        "string-priority",
        _set("runnerVariants.0.priority", "high"),
        "spec.runnerVariants[0].priority",
        "spec.runnerVariants[0].priority",
        "integer",
    ),
    # CEL on the list: the server names the list, arcflow the later duplicate's name.
    (
        "duplicate-variant-names",
        _duplicate_names,
        "spec.runnerVariants[1].name",
        "spec.runnerVariants",
        "names must be unique",
    ),
    # scheduledOverrides (ADR 0063): a CEL rule on the item with a fieldPath, an enum, and a
    # spec-level CEL rule naming the list.
    (
        "override-ends-before-start",
        _set("scheduledOverrides", [{**_WINDOW, "endTime": "2026-01-05T08:00:00+02:00"}]),
        "spec.scheduledOverrides[0].endTime",
        "spec.scheduledOverrides[0].endTime",
        "endTime must be after startTime",
    ),
    (
        "override-unknown-frequency",
        _set("scheduledOverrides", [{**_WINDOW, "recurrenceRule": {"frequency": "Hourly"}}]),
        "spec.scheduledOverrides[0].recurrenceRule.frequency",
        "spec.scheduledOverrides[0].recurrenceRule.frequency",
        'supported values: "Daily", "Weekly", "Monthly", "Yearly"',
    ),
    (
        "override-unknown-variant",
        _set("scheduledOverrides", [{**_WINDOW, "variants": ["cpu-small", "nope"]}]),
        "spec.scheduledOverrides[0].variants[1]",
        "spec.scheduledOverrides",
        "names a variant that is not in spec.runnerVariants",
    ),
]


@pytest.mark.parametrize(
    ("change", "arcflow_path", "server_field", "rule"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_the_server_and_arcflow_validate_refuse_alike(
    backend: Backend,
    change: Callable[[Doc], None],
    arcflow_path: str,
    server_field: str,
    rule: str,
) -> None:
    doc = _variants(backend.namespace, "invalid")
    change(doc)
    ours = [e for e in validate_manifest(doc) if e.path == arcflow_path]
    assert ours, f"arcflow validate reports nothing at {arcflow_path}: {validate_manifest(doc)}"
    assert any(rule in e.message for e in ours), ours
    with pytest.raises(InvalidError) as caught:
        await backend.client.create(doc)
    causes = [c for c in caught.value.causes if c.get("field") == server_field]
    assert causes, f"no cause at {server_field}: {caught.value.causes}"
    assert any(rule.lower() in str(c.get("message")).lower() for c in causes), causes
    assert arcflow_path.startswith(server_field)


async def test_variant_name_pattern_same_field_different_words(backend: Backend) -> None:
    """Same field; the server quotes the CRD's pattern, arcflow says "not a DNS label"."""
    doc = _variants(backend.namespace, "bad-variant")
    doc["spec"]["runnerVariants"][0]["name"] = "Not_A_Label"
    [ours] = [e for e in validate_manifest(doc) if e.path == "spec.runnerVariants[0].name"]
    assert "is not a DNS label" in ours.message
    with pytest.raises(InvalidError) as caught:
        await backend.client.create(doc)
    [cause] = [c for c in caught.value.causes if c.get("field") == "spec.runnerVariants[0].name"]
    assert "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" in cause["message"]


@pytest.mark.parametrize(
    "example",
    [
        "01-single-scale-set.yaml",
        "02-runner-variants.yaml",
        "03-shared-capacity.yaml",
        "04-scheduled-minimums.yaml",
    ],
)
async def test_the_examples_pass_both(backend: Backend, example: str) -> None:
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    doc["metadata"] = {"name": "example", "namespace": backend.namespace}
    assert validate_manifest(doc) == []
    created = await backend.client.create(doc)
    assert created["spec"] == doc["spec"]  # nothing pruned, nothing defaulted


async def test_unknown_spec_field_is_pruned_by_the_server_refused_by_arcflow(
    backend: Backend,
) -> None:
    """The structural schema prunes what it does not know (the write succeeds, the field is
    gone); arcflow validate refuses it, so a typo does not silently vanish."""
    doc = _variants(backend.namespace, "typo")
    doc["spec"]["minRunner"] = 3
    assert [e.path for e in validate_manifest(doc)] == ["spec.minRunner"]
    created = await backend.client.create(doc)
    assert "minRunner" not in created["spec"]
    stored = await backend.client.get(AUTOSCALING_RUNNER_SET, "typo", backend.namespace)
    assert "minRunner" not in stored["spec"]
