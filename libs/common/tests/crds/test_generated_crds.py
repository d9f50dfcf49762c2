"""The committed CRDs match the models, are valid Kubernetes objects, structural, and accept
the example manifests (and reject what the schema forbids)."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).parents[4]
CRD_DIR = REPO / "deploy" / "crds"
EXAMPLES = REPO / "examples"
MANIFESTS = Path(__file__).parents[1] / "testdata" / "manifests"
PLURALS = (
    "autoscalingrunnersets",
    "ephemeralrunnersets",
    "ephemeralrunners",
    "autoscalinglisteners",
)


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_crds", REPO / "scripts" / "generate_crds.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_crds"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()


def committed(plural: str) -> dict[str, Any]:
    doc = yaml.safe_load((CRD_DIR / f"actions.github.com_{plural}.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def schema_of(kind_doc: dict[str, Any]) -> dict[str, Any]:
    plural = {
        "AutoscalingRunnerSet": "autoscalingrunnersets",
        "EphemeralRunnerSet": "ephemeralrunnersets",
        "EphemeralRunner": "ephemeralrunners",
        "AutoscalingListener": "autoscalinglisteners",
    }[kind_doc["kind"]]
    schema = committed(plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    converted: dict[str, Any] = to_json_schema(schema)
    return converted


def to_json_schema(node: Any) -> Any:
    """Drop the x-kubernetes-* keys jsonschema cannot check; map preserve-unknown-fields."""
    if isinstance(node, dict):
        return {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    return node


def test_committed_files_match_the_models() -> None:
    rendered = GENERATOR.render_all()
    assert sorted(rendered) == sorted(f"actions.github.com_{p}.yaml" for p in PLURALS)
    stale = [
        name
        for name, text in rendered.items()
        if not (CRD_DIR / name).exists() or (CRD_DIR / name).read_text() != text
    ]
    assert stale == [], f"{stale} are out of date: run scripts/generate_crds.py"


def test_check_mode_detects_drift(tmp_path: Path) -> None:
    assert GENERATOR.main(["--out", str(tmp_path)]) == 0
    assert GENERATOR.main(["--out", str(tmp_path), "--check"]) == 0
    victim = tmp_path / "actions.github.com_ephemeralrunners.yaml"
    victim.write_text(victim.read_text().replace("RunnerId", "RunnerID"))
    assert GENERATOR.main(["--out", str(tmp_path), "--check"]) == 1


@pytest.mark.parametrize("plural", PLURALS)
def test_crd_is_a_valid_kubernetes_object(plural: str) -> None:
    doc = committed(plural)
    kubernetes_validate.validate(doc, "1.32.0", strict=True)
    spec = doc["spec"]
    assert doc["metadata"]["name"] == f"{plural}.actions.github.com"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == plural
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"]
    assert version["storage"]
    assert version["subresources"] == {"status": {}}


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for key, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")


@pytest.mark.parametrize("plural", PLURALS)
def test_schema_is_structural(plural: str) -> None:
    schema = committed(plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    untyped = [
        path
        for path, node in walk(schema)
        if "type" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and not node.get("x-kubernetes-int-or-string")  # quantities (capacity.resources)
    ]
    assert untyped == []
    forbidden = {"anyOf", "oneOf", "allOf", "$ref", "const", "title", "default", "nullable"}
    assert [
        (p, sorted(forbidden & n.keys())) for p, n in walk(schema) if forbidden & n.keys()
    ] == []


def test_pod_templates_preserve_unknown_fields() -> None:
    spec = committed("autoscalingrunnersets")["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]["spec"]["properties"]
    for node in (
        spec["template"],
        spec["listenerTemplate"],
        spec["runnerVariants"]["items"]["properties"]["template"],
    ):
        assert node == {
            "description": node["description"],
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }


def test_printer_columns_drop_dangling_status_fields() -> None:
    for plural in ("autoscalingrunnersets", "ephemeralrunnersets"):
        columns = committed(plural)["spec"]["versions"][0]["additionalPrinterColumns"]
        paths = [c["jsonPath"] for c in columns]
        assert ".status.finishedEphemeralRunners" not in paths
        assert ".status.deletingEphemeralRunners" not in paths
    ars_columns = committed("autoscalingrunnersets")["spec"]["versions"][0][
        "additionalPrinterColumns"
    ]
    assert [c["name"] for c in ars_columns] == [
        "Minimum Runners",
        "Maximum Runners",
        "Current Runners",
        "Phase",
        "Pending Runners",
        "Running Runners",
        "Registration",  # arcflow's from here on: ScaleSetsRegistered's reason (ADR 0064)
        "Sessions",  # ListenerSessionsOpen's reason (ADR 0064, amendment)
        "Drain",  # ADR 0062: Draining / Drained
        "Scale Set ID",
        "Variant Scale Set IDs",
    ]


@pytest.mark.parametrize("plural", PLURALS)
def test_printer_columns_point_at_schema_fields(plural: str) -> None:
    """Every spec/status column names a field of the schema (metadata paths are free-form)."""
    version = committed(plural)["spec"]["versions"][0]
    for column in version["additionalPrinterColumns"]:
        # A list filter (conditions[?(@.type=="X")]) walks into the list's items.
        path = re.sub(r"\[\?\(@\.\w+==\"[^\"]*\"\)\]", "[]", column["jsonPath"])
        parts = path.lstrip(".").split(".")
        if parts[0] == "metadata":
            continue
        node = version["schema"]["openAPIV3Schema"]
        for part in parts:
            name = part.removesuffix("[]")
            assert name in node.get("properties", {}), f"{plural}: {column['jsonPath']}"
            node = node["properties"][name]
            if part.endswith("[]"):
                node = node["items"]


def test_runner_variants_cel_rules_and_limits() -> None:
    spec = committed("autoscalingrunnersets")["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]["spec"]["properties"]
    variants = spec["runnerVariants"]
    assert {"rule": "self.all(x, self.exists_one(y, y.name == x.name))"}.items() <= variants[
        "x-kubernetes-validations"
    ][0].items()
    assert variants["maxItems"] > 0
    item = variants["items"]
    assert item["required"] == ["name"]
    assert item["properties"]["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert item["properties"]["name"]["maxLength"] == 63
    [rule] = item["x-kubernetes-validations"]
    assert "self.minRunners <= self.maxRunners" in rule["rule"]
    for node in (spec["minRunners"], spec["maxRunners"], item["properties"]["minRunners"]):
        assert node["minimum"] == 0


def example_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in [*sorted(EXAMPLES.glob("0[12]-*.yaml")), *sorted(MANIFESTS.glob("*.yaml"))]:
        docs.append((path.name, yaml.safe_load(path.read_text())))
    return docs


@pytest.mark.parametrize(("name", "doc"), example_docs(), ids=[n for n, _ in example_docs()])
def test_manifests_validate_against_the_crd_schema(name: str, doc: dict[str, Any]) -> None:
    jsonschema.validate(doc, schema_of(doc))


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["spec"].__setitem__("minRunners", -1), "minimum"),
        (
            lambda d: d["spec"]["runnerVariants"][0].__setitem__("name", "Bad_Name"),
            "does not match",
        ),
        (lambda d: d["spec"]["runnerVariants"][0].pop("name"), "'name' is a required property"),
        (lambda d: d["spec"].__setitem__("maxRunners", "10"), "is not of type 'integer'"),
    ],
)
def test_crd_schema_rejects_bad_manifests(mutate: Any, needle: str) -> None:
    doc = copy.deepcopy(yaml.safe_load((EXAMPLES / "02-runner-variants.yaml").read_text()))
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError, match=needle):
        jsonschema.validate(doc, schema_of(doc))
