"""Upstream-style manifests survive parse -> serialise unchanged (nothing lost, renamed, added)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.models import (
    KINDS,
    AutoscalingListener,
    AutoscalingRunnerSet,
    EphemeralRunner,
    EphemeralRunnerSet,
    KubeObject,
)

MANIFESTS = Path(__file__).parents[1] / "testdata" / "manifests"
EXAMPLES = Path(__file__).parents[4] / "examples"


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(
    ("file_name", "model"),
    [
        ("ars-upstream-rich.yaml", AutoscalingRunnerSet),
        ("ers-upstream.yaml", EphemeralRunnerSet),
        ("er-upstream.yaml", EphemeralRunner),
        ("al-upstream.yaml", AutoscalingListener),
    ],
)
def test_upstream_manifest_round_trips_exactly(file_name: str, model: type[KubeObject]) -> None:
    doc = load(MANIFESTS / file_name)
    assert model.from_manifest(doc).to_manifest() == doc


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("0[12]-*.yaml")), ids=lambda p: p.name)
def test_examples_round_trip(path: Path) -> None:
    doc = load(path)
    assert KINDS[doc["kind"]].from_manifest(doc).to_manifest() == doc


def test_rich_manifest_fields_are_modelled_not_just_kept() -> None:
    """The round trip must come from real fields, not from everything landing in extras."""
    ars = AutoscalingRunnerSet.from_manifest(load(MANIFESTS / "ars-upstream-rich.yaml"))
    spec = ars.spec
    assert spec.model_extra == {}
    assert spec.proxy is not None
    assert spec.proxy.http is not None
    assert spec.proxy.http.credential_secret_ref == "proxy-credentials"
    assert spec.proxy.no_proxy == ["example.internal", "10.0.0.0/8"]
    tls = spec.github_server_tls
    assert tls is not None
    assert tls.certificate_from is not None
    assert tls.certificate_from.config_map_key_ref is not None
    assert tls.certificate_from.config_map_key_ref.key == "ca.crt"
    assert spec.vault_config is not None
    assert spec.vault_config.azure_key_vault is not None
    assert spec.vault_config.azure_key_vault.tenant_id == "tenant-1"
    assert spec.autoscaling_listener_metadata is not None
    assert spec.autoscaling_listener_metadata.labels == {"team": "ci"}
    assert spec.listener_metrics is not None
    assert spec.listener_metrics.histograms is not None
    histogram = spec.listener_metrics.histograms["gha_job_startup_duration_seconds"]
    assert histogram.buckets is not None
    assert histogram.buckets[0] == 0.01
    assert spec.ephemeral_runner_config_secret_metadata is not None
    assert spec.ephemeral_runner_config_secret_metadata.labels == {"jit": "secret"}
    assert spec.min_runners == 1
    assert spec.max_runners == 20
    assert spec.template["spec"]["futureKubernetesField"] == {"nested": [1, 2, {"deep": True}]}
    assert ars.status is not None
    assert ars.status.running_ephemeral_runners == 2
    assert ars.metadata.resource_version == "48213"
    assert ars.metadata.model_extra is not None
    assert "managedFields" in ars.metadata.model_extra


def test_explicit_empty_labels_stay_and_absent_labels_stay_absent() -> None:
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a"},
        "spec": {
            "runnerScaleSetLabels": [],
            "runnerVariants": [{"name": "x", "runnerScaleSetLabels": []}, {"name": "y"}],
        },
    }
    out = AutoscalingRunnerSet.from_manifest(doc).to_manifest()
    assert out["spec"]["runnerScaleSetLabels"] == []
    assert out["spec"]["runnerVariants"][0] == {"name": "x", "runnerScaleSetLabels": []}
    assert out["spec"]["runnerVariants"][1] == {"name": "y"}


def test_explicit_zero_and_null_values_round_trip() -> None:
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a", "creationTimestamp": None},
        "spec": {"minRunners": 0, "maxRunners": 0, "runnerGroup": ""},
    }
    assert AutoscalingRunnerSet.from_manifest(doc).to_manifest() == doc


def test_unknown_keys_are_preserved_everywhere() -> None:
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a", "selfLink": "/x"},
        "spec": {"futureUpstreamField": {"a": 1}, "proxy": {"socks": {"url": "x"}}},
    }
    assert AutoscalingRunnerSet.from_manifest(doc).to_manifest() == doc


def test_from_manifest_does_not_share_state_with_the_input() -> None:
    doc = load(MANIFESTS / "ars-upstream-rich.yaml")
    pristine = copy.deepcopy(doc)
    ars = AutoscalingRunnerSet.from_manifest(doc)
    ars.spec.template["spec"]["containers"][0]["image"] = "changed"
    out = ars.to_manifest()
    out["spec"]["listenerTemplate"]["spec"]["containers"].clear()
    assert doc == pristine
    assert ars.spec.listener_template is not None
    assert ars.spec.listener_template["spec"]["containers"] != []
