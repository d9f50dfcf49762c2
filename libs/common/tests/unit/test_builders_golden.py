"""Back-compat goldens: what arcflow writes for a set without variants must never drift.

The files in ``libs/common/tests/golden/`` were produced once by these tests. To regenerate
them after a deliberate change, run::

    ARCFLOW_UPDATE_GOLDENS=1 .venv/bin/pytest libs/common/tests/unit/test_builders_golden.py

and review the diff: a changed integrity hash recreates listener pods fleet-wide.
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.builders import BuildSettings, decode_secret_data, plan_objects
from arcflow.common.hashing import (
    ephemeral_runner_set_integrity_hash,
    listener_spec_hash,
    role_hash,
)
from arcflow.common.models import AutoscalingRunnerSet

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("ARCFLOW_UPDATE_GOLDENS") == "1"


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"golden {name} missing; run with ARCFLOW_UPDATE_GOLDENS=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from the golden file"


def _dump(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True)


def _config_json(objects: list[dict[str, Any]]) -> str:
    (secret,) = [o for o in objects if o["metadata"]["name"].endswith("-listener-config")]
    return decode_secret_data(secret["data"])["config.json"]


def _plan(
    doc: dict[str, Any], ids: dict[str, int], settings: BuildSettings
) -> list[dict[str, Any]]:
    return plan_objects(AutoscalingRunnerSet.from_manifest(doc), ids, settings)


@pytest.mark.parametrize("variants", ["absent", None, []], ids=["no-key", "null", "empty"])
def test_set_without_variants_matches_golden(
    single_ars_doc: dict[str, Any], settings: BuildSettings, variants: Any
) -> None:
    doc = copy.deepcopy(single_ars_doc)
    if variants != "absent":
        doc["spec"]["runnerVariants"] = variants
    objects = _plan(doc, {"": 7}, settings)
    _check_golden("single.yaml", _dump(objects))
    _check_golden("single.config.json", _config_json(objects))


def test_set_without_variants_hashes_use_upstream_inputs_only(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """Recompute each hash from hand-written, variant-unaware inputs (upstream's shape)."""
    ers, al, _sa, role, *_ = _plan(single_ars_doc, {"": 7}, settings)
    upstream_runner_spec = {
        "githubConfigUrl": "https://github.com/acme/widgets",
        "githubConfigSecret": "github-auth",
        "runnerScaleSetId": 7,
        "metadata": {"labels": {"runner-shape": "standard"}},
        "spec": single_ars_doc["spec"]["template"]["spec"],
    }
    assert ers["metadata"]["annotations"]["actions.github.com/integrity-hash"] == (
        ephemeral_runner_set_integrity_hash(upstream_runner_spec)
    )
    upstream_al_spec = {
        "githubConfigUrl": "https://github.com/acme/widgets",
        "githubConfigSecret": "github-auth",
        "runnerScaleSetId": 7,
        "autoscalingRunnerSetNamespace": "arc-runners",
        "autoscalingRunnerSetName": "arc-runners",
        "ephemeralRunnerSetName": "arc-runners",
        "maxRunners": 5,
        "minRunners": 1,
        "image": "ghcr.io/arcflow/listener:0.1.0",
    }
    assert al["spec"] == upstream_al_spec
    assert al["metadata"]["annotations"] == {
        "actions.github.com/integrity-hash": listener_spec_hash(upstream_al_spec)
    }
    assert role["rules"][0]["resourceNames"] == ["arc-runners"]
    assert role["metadata"]["annotations"]["actions.github.com/integrity-hash"] == role_hash(
        role["rules"]
    )


def test_two_variant_set_matches_golden(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    objects = _plan(variants_ars_doc, {"cpu": 11, "gpu": 12}, settings)
    _check_golden("variants.yaml", _dump(objects))
    _check_golden("variants.config.json", _config_json(objects))


def test_single_config_json_golden_is_upstream_shaped() -> None:
    """The committed bytes themselves: upstream keys in order, no scale_sets, newline end."""
    text = (GOLDEN_DIR / "single.config.json").read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert "scale_sets" not in text
    assert text.startswith('{"configure_url":"https://github.com/acme/widgets","vault_type":""')
    assert '"github_token":"\\u003credacted\\u003e"' in text


NATS_SETTINGS = {
    "listener_nats_url": "nats://nats.nats.svc:4222",
    "listener_nats_secret": "arcflow-listener-nats",
    "listener_nats_tls_secret": "arcflow-nats-ca",
}


def _pod_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (pod,) = [o for o in objects if o["kind"] == "Pod"]
    return pod


def test_set_with_listener_nats_matches_golden(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """The same set with listener NATS wiring: only the listener pod may differ."""
    wired = replace(settings, **NATS_SETTINGS)
    objects = _plan(single_ars_doc, {"": 7}, wired)
    _check_golden("single.nats.yaml", _dump(objects))
    plain = _plan(single_ars_doc, {"": 7}, settings)
    assert [o for o in objects if o["kind"] != "Pod"] == [o for o in plain if o["kind"] != "Pod"]
    pod, plain_pod = _pod_of(objects), _pod_of(plain)
    added_env = pod["spec"]["containers"][0]["env"][
        len(plain_pod["spec"]["containers"][0]["env"]) :
    ]
    assert [e["name"] for e in added_env] == [
        "ARCFLOW_NATS_URL",
        "ARCFLOW_NATS_USER",
        "ARCFLOW_NATS_PASSWORD",
        "ARCFLOW_NATS_TLS_CA",
    ]
    assert pod["metadata"]["annotations"] != plain_pod["metadata"]["annotations"]


def test_two_variant_set_with_listener_nats_matches_golden(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    wired = replace(settings, **NATS_SETTINGS)
    objects = _plan(variants_ars_doc, {"cpu": 11, "gpu": 12}, wired)
    _check_golden("variants.nats.yaml", _dump(objects))
    plain = _plan(variants_ars_doc, {"cpu": 11, "gpu": 12}, settings)
    assert [o for o in objects if o["kind"] != "Pod"] == [o for o in plain if o["kind"] != "Pod"]
