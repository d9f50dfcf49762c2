"""Chart behaviour that needs a cluster, with real helm (`install --dry-run=server`, which runs
`lookup` against the cluster and prints the install notes) against the Kubernetes API emulator.

- Moving from upstream ARC (docs/migrating-from-arc.md): a scaled-to-zero upstream controller
  Deployment still carries the labels the runner-set chart's lookup matches, so without
  controllerServiceAccount the manager Role is bound to the upstream controller's service
  account, or the render fails once arcflow's reconciler is installed too.
- The arcflow chart keeps an existing NATS user's password (read back with lookup).
- The runner-set chart's notes name a container mode type it ignores."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.kube.resources import SECRET, Resource
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


RUNNER_SET = (
    "--set",
    "githubConfigUrl=https://github.com/example-org",
    "--set",
    "githubConfigSecret.github_token=ghp_not_a_real_token",
)


async def _dry_run(
    helm: Helm,
    kubeconfig: Path,
    *values: str,
    chart: str = "arcflow-runner-set",
    namespace: str = "arc-runners",
    base: tuple[str, ...] = RUNNER_SET,
) -> tuple[int, str]:
    args = [
        "install",
        "arc-runner-set" if chart == "arcflow-runner-set" else "arcflow",
        str(HELM_DIR / chart),
        "--namespace",
        namespace,
        "--dry-run=server",
        "--disable-openapi-validation",
        *base,
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


def _manifest(output: str) -> list[dict[str, Any]]:
    manifest = output.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    return [d for d in yaml.safe_load_all(manifest) if d]


def _binding_subjects(output: str) -> list[dict[str, Any]]:
    [binding] = [d for d in _manifest(output) if d["kind"] == "RoleBinding"]
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


async def test_nats_user_passwords_survive_an_upgrade(
    kube_emulator: KubeEmulator, helm: Helm, tmp_path: Path
) -> None:
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    kept = "pwAlreadyInUseByTheRunningWatcher42"
    kube_emulator.store.create(
        SECRET,
        "arc-system",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {  # as the release's first install left it
                "name": "arcflow-nats-watcher",
                "namespace": "arc-system",
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {
                    "meta.helm.sh/release-name": "arcflow",
                    "meta.helm.sh/release-namespace": "arc-system",
                },
            },
            "data": {
                "user": base64.b64encode(b"arcflow-watcher").decode(),
                "password": base64.b64encode(kept.encode()).decode(),
            },
        },
    )
    # the emulator serves no Deployments or Services: the user Secrets are what is tested
    components = [f"{c}.enabled=false" for c in ("crds", "watcher", "registrar", "reconciler")]
    code, output = await _dry_run(
        helm, kubeconfig, *components, chart="arcflow", namespace="arc-system", base=()
    )
    assert code == 0, output
    secrets = {d["metadata"]["name"]: d for d in _manifest(output) if d["kind"] == "Secret"}
    passwords = {
        name: base64.b64decode(secret["data"]["password"]).decode()
        for name, secret in secrets.items()
    }
    assert passwords["arcflow-nats-watcher"] == kept
    assert passwords["arcflow-nats-registrar"] != kept  # a new user gets a new password
    assert len(set(passwords.values())) == 5


async def test_install_notes_name_an_ignored_container_mode(
    kube_emulator: KubeEmulator, helm: Helm, tmp_path: Path
) -> None:
    kubeconfig = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    service_account = (
        "controllerServiceAccount.name=arcflow-reconciler",
        "controllerServiceAccount.namespace=arc-system",
    )
    code, output = await _dry_run(helm, kubeconfig, *service_account, "containerMode.type=none")
    assert code == 0, output
    assert 'containerMode.type "none" is not a container mode' in output.split("NOTES:", 1)[1]
    code, output = await _dry_run(helm, kubeconfig, *service_account, "containerMode.type=dind")
    assert code == 0, output
    assert "is not a container mode" not in output
