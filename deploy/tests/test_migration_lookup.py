"""Moving from upstream ARC (docs/migrating-from-arc.md): the runner-set chart's controller
lookup run by real helm (`install --dry-run=server`, which runs `lookup` against the cluster)
against the Kubernetes API emulator. A scaled-to-zero upstream controller Deployment still
carries the labels the lookup matches, so without controllerServiceAccount the manager Role
is bound to the upstream controller's service account, or the render fails once arcflow's
reconciler is installed too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.kube.resources import Resource
from arcflow.devstack.kube_emulator import KubeEmulator
from deploy.tests.helpers import HELM_DIR, Helm

pytestmark = pytest.mark.integration

DEPLOYMENT = Resource(
    "apps", "v1", "deployments", "Deployment", has_status=True, singular="deployment"
)


def _controller(name: str, namespace: str, service_account: str, replicas: int) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/part-of": "gha-rs-controller",
        "actions.github.com/controller-service-account-name": service_account,
        "actions.github.com/controller-service-account-namespace": namespace,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "manager", "image": "example.com/c:1"}]},
            },
        },
    }


async def _dry_run(helm: Helm, kubeconfig: Path, *values: str) -> tuple[int, str]:
    args = [
        "install",
        "arc-runner-set",
        str(HELM_DIR / "arcflow-runner-set"),
        "--namespace",
        "arc-runners",
        "--dry-run=server",
        "--disable-openapi-validation",
        "--set",
        "githubConfigUrl=https://github.com/example-org",
        "--set",
        "githubConfigSecret.github_token=ghp_not_a_real_token",
    ]
    for value in values:
        args += ["--set", value]
    env = {**helm.env, "KUBECONFIG": str(kubeconfig)}
    process = await asyncio.create_subprocess_exec(
        str(helm.binary),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode() + err.decode()


def _binding_subjects(output: str) -> list[dict[str, Any]]:
    manifest = output.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    [binding] = [d for d in docs if d["kind"] == "RoleBinding"]
    subjects: list[dict[str, Any]] = binding["subjects"]
    return subjects


async def test_scaled_to_zero_upstream_controller_still_matches_the_lookup(
    kube_emulator: KubeEmulator, helm: Helm, tmp_path: Path
) -> None:
    kube_emulator.register(DEPLOYMENT)
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    upstream = _controller("arc-gha-rs-controller", "arc-systems", "arc-gha-rs-controller", 0)
    kube_emulator.store.create(DEPLOYMENT, "arc-systems", upstream)

    # only the stopped upstream controller: the Role would go to its service account
    code, output = await _dry_run(helm, kubeconfig)
    assert code == 0, output
    assert _binding_subjects(output) == [
        {"kind": "ServiceAccount", "name": "arc-gha-rs-controller", "namespace": "arc-systems"}
    ]

    # arcflow's reconciler installed next to it: two matches, the render refuses
    reconciler = _controller("arcflow-reconciler", "arc-system", "arcflow-reconciler", 1)
    kube_emulator.store.create(DEPLOYMENT, "arc-system", reconciler)
    code, output = await _dry_run(helm, kubeconfig)
    assert code != 0
    assert "More than one gha-rs-controller deployment found" in output

    # the documented fix: name the reconciler's service account
    code, output = await _dry_run(
        helm,
        kubeconfig,
        "controllerServiceAccount.name=arcflow-reconciler",
        "controllerServiceAccount.namespace=arc-system",
    )
    assert code == 0, output
    assert _binding_subjects(output) == [
        {"kind": "ServiceAccount", "name": "arcflow-reconciler", "namespace": "arc-system"}
    ]
