"""Chart behaviour that needs a cluster, with real helm against a real kube-apiserver (the
session's; real RBAC, CRD schemas and CEL rules):

- Every rendered object is accepted: the umbrella chart and a runner set installed for real,
  and every runner-set values file's AutoscalingRunnerSet created with a server-side dry run;
  the CRD's structural schema prunes nothing the chart writes.

- `install --dry-run=server` runs `lookup` against the cluster and prints the install notes.
  Moving from upstream ARC (docs/migrating-from-arc.md): a scaled-to-zero upstream controller
  Deployment still carries the labels the runner-set chart's lookup matches, so without
  controllerServiceAccount the manager Role is bound to the upstream controller's service
  account, or the render fails once arcflow's reconciler is installed too.
- The arcflow chart keeps an existing NATS user's password (read back with lookup).
- The runner-set chart's notes name a container mode type it ignores."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import urllib.error
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.devstack.control_plane import ControlPlane
from deploy.tests.helpers import HELM_DIR, VALUES_DIR, Helm
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.manifests import assert_written

pytestmark = pytest.mark.integration


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


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The session's kube-apiserver (its admin kubeconfig is what helm uses)."""
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("needs the session's own real kube-apiserver")
    found: ControlPlane = request.getfixturevalue("control_plane")
    return found


@pytest.fixture
async def namespaces(kube_client: KubeClient, kube_namespace: str) -> AsyncIterator[list[str]]:
    """Two more namespaces of the test's own (the controller's and the reconciler's)."""
    made = [f"{kube_namespace}-ctl", f"{kube_namespace}-sys"]
    for name in made:
        await kube_client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    yield [kube_namespace, *made]
    for name in made:
        with contextlib.suppress(NotFoundError):
            await kube_client.delete("Namespace", name)


async def _helm(helm: Helm, kubeconfig: Path, *args: str) -> tuple[int, str]:
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


async def _dry_run(
    helm: Helm,
    kubeconfig: Path,
    *values: str,
    chart: str = "arcflow-runner-set",
    namespace: str,
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
    return await _helm(helm, kubeconfig, *args)


def _manifest(output: str) -> list[dict[str, Any]]:
    manifest = output.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    return [d for d in yaml.safe_load_all(manifest) if d]


def _binding_subjects(output: str) -> list[dict[str, Any]]:
    [binding] = [d for d in _manifest(output) if d["kind"] == "RoleBinding"]
    subjects: list[dict[str, Any]] = binding["subjects"]
    return subjects


async def test_scaled_to_zero_upstream_controller_still_matches_the_lookup(
    plane: ControlPlane, namespaces: list[str], helm: Helm
) -> None:
    runners, upstream_ns, arcflow_ns = namespaces
    # The chart's lookup sees every Deployment of the cluster: only this test makes ones with
    # the upstream controller's labels, and it deletes them again.
    made: list[tuple[str, str]] = []
    try:
        upstream = _controller("arc-gha-rs-controller", upstream_ns, "arc-gha-rs-controller", 0)
        await _admin(plane, "POST", _path(upstream, upstream_ns, collection=True), upstream)
        made.append(("arc-gha-rs-controller", upstream_ns))

        # only the stopped upstream controller: the Role would go to its service account
        code, output = await _dry_run(helm, plane.kubeconfig, namespace=runners)
        assert code == 0, output
        assert _binding_subjects(output) == [
            {"kind": "ServiceAccount", "name": "arc-gha-rs-controller", "namespace": upstream_ns}
        ]

        # arcflow's reconciler installed next to it: two matches, the render refuses
        reconciler = _controller("arcflow-reconciler", arcflow_ns, "arcflow-reconciler", 1)
        await _admin(plane, "POST", _path(reconciler, arcflow_ns, collection=True), reconciler)
        made.append(("arcflow-reconciler", arcflow_ns))
        code, output = await _dry_run(helm, plane.kubeconfig, namespace=runners)
        assert code != 0
        assert "More than one gha-rs-controller deployment found" in output

        # the documented fix: name the reconciler's service account
        code, output = await _dry_run(
            helm,
            plane.kubeconfig,
            "controllerServiceAccount.name=arcflow-reconciler",
            f"controllerServiceAccount.namespace={arcflow_ns}",
            namespace=runners,
        )
        assert code == 0, output
        assert _binding_subjects(output) == [
            {"kind": "ServiceAccount", "name": "arcflow-reconciler", "namespace": arcflow_ns}
        ]
    finally:
        for name, namespace in made:
            path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
            with contextlib.suppress(urllib.error.HTTPError):
                await _admin(plane, "DELETE", path)


async def test_nats_user_passwords_survive_an_upgrade(
    plane: ControlPlane, kube_client: KubeClient, kube_namespace: str, helm: Helm
) -> None:
    kept = "pwAlreadyInUseByTheRunningWatcher42"
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {  # as the release's first install left it
                "name": "arcflow-nats-watcher",
                "namespace": kube_namespace,
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {
                    "meta.helm.sh/release-name": "arcflow",
                    "meta.helm.sh/release-namespace": kube_namespace,
                },
            },
            "data": {
                "user": base64.b64encode(b"arcflow-watcher").decode(),
                "password": base64.b64encode(kept.encode()).decode(),
            },
        }
    )
    # only the user Secrets are under test here
    components = [f"{c}.enabled=false" for c in ("crds", "watcher", "registrar", "reconciler")]
    code, output = await _dry_run(
        helm, plane.kubeconfig, *components, chart="arcflow", namespace=kube_namespace, base=()
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
    plane: ControlPlane, kube_namespace: str, helm: Helm
) -> None:
    service_account = (
        "controllerServiceAccount.name=arcflow-reconciler",
        "controllerServiceAccount.namespace=arc-system",
    )
    code, output = await _dry_run(
        helm, plane.kubeconfig, *service_account, "containerMode.type=none",
        namespace=kube_namespace,
    )  # fmt: skip
    assert code == 0, output
    assert 'containerMode.type "none" is not a container mode' in output.split("NOTES:", 1)[1]
    code, output = await _dry_run(
        helm, plane.kubeconfig, *service_account, "containerMode.type=dind",
        namespace=kube_namespace,
    )  # fmt: skip
    assert code == 0, output
    assert "is not a container mode" not in output


async def test_the_charts_install_on_a_real_server(
    plane: ControlPlane, namespaces: list[str], helm: Helm
) -> None:
    """The umbrella chart (its CRDs are the server's already) and a two-variant runner set,
    installed for real: every object is created (RBAC, schemas and CEL rules pass), and the
    runner set's ARS is stored as rendered, nothing pruned."""
    runners, _, arcflow_ns = namespaces
    releases: list[tuple[str, str]] = []
    try:
        code, output = await _helm(
            helm, plane.kubeconfig, "install", "arcflow", str(HELM_DIR / "arcflow"),
            "--namespace", arcflow_ns, "--set", "crds.enabled=false",
        )  # fmt: skip
        assert code == 0, output
        releases.append(("arcflow", arcflow_ns))
        code, output = await _helm(
            helm, plane.kubeconfig, "install", "arc-runner-set",
            str(HELM_DIR / "arcflow-runner-set"), "--namespace", runners,
            "--values", str(VALUES_DIR / "runner-set" / "two-variants.yaml"),
            "--set", "controllerServiceAccount.name=arcflow-reconciler",
            "--set", f"controllerServiceAccount.namespace={arcflow_ns}",
        )  # fmt: skip
        assert code == 0, output
        releases.append(("arc-runner-set", runners))
        for release, namespace in releases:
            code, manifest = await _helm(
                helm, plane.kubeconfig, "get", "manifest", release, "--namespace", namespace
            )
            assert code == 0, manifest
            rendered = [d for d in yaml.safe_load_all(manifest) if d]
            assert rendered
            for doc in rendered:
                live = await _admin(plane, "GET", _path(doc, namespace))
                assert live["metadata"]["name"] == doc["metadata"]["name"]
                if doc["apiVersion"].startswith("actions.github.com/"):
                    assert_written(live["spec"], doc["spec"], f"{doc['kind']}.spec")
    finally:
        for release, namespace in reversed(releases):
            await _helm(helm, plane.kubeconfig, "uninstall", release, "--namespace", namespace)


_CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "Namespace"}


def _path(doc: dict[str, Any], namespace: str, *, collection: bool = False) -> str:
    """The API path of a rendered built-in or arcflow object (plurals are kind + s)."""
    group_version = doc["apiVersion"]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = doc["kind"].lower() + "s"
    if doc["kind"] not in _CLUSTER_KINDS:
        base += f"/namespaces/{doc['metadata'].get('namespace') or namespace}"
    return f"{base}/{plural}" if collection else f"{base}/{plural}/{doc['metadata']['name']}"


async def _admin(plane: ControlPlane, method: str, path: str, body: Any = None) -> dict[str, Any]:
    return await asyncio.to_thread(plane.request, method, path, body)


def _dry_run_create(plane: ControlPlane, namespace: str, ars: dict[str, Any]) -> dict[str, Any]:
    path = f"/apis/actions.github.com/v1alpha1/namespaces/{namespace}/autoscalingrunnersets"
    try:
        return plane.request("POST", f"{path}?dryRun=All", ars)
    except urllib.error.HTTPError as exc:
        refused = json.loads(exc.read() or b"{}")
        raise AssertionError(f"{exc.code}: {refused.get('message')}") from None


async def test_every_values_file_renders_an_ars_the_crd_accepts(
    plane: ControlPlane, kube_namespace: str, helm: Helm
) -> None:
    """Each example values file: its AutoscalingRunnerSet passes the CRD's schema and CEL
    rules (a server-side dry run) and loses no field to pruning."""
    files = sorted((VALUES_DIR / "runner-set").glob("*.yaml"))
    assert len(files) >= 9
    for values in files:
        docs = helm.render("arcflow-runner-set", values, release="arc", namespace=kube_namespace)
        [ars] = [d for d in docs if d["kind"] == "AutoscalingRunnerSet"]
        ars["metadata"]["namespace"] = kube_namespace  # over a namespaceOverride
        try:
            stored = await asyncio.to_thread(_dry_run_create, plane, kube_namespace, ars)
        except AssertionError as exc:
            raise AssertionError(f"{values.name}: the server refused the ARS: {exc}") from None
        assert_written(stored["spec"], ars["spec"], f"{values.name}: spec")


async def test_install_notes_list_every_variant_scale_set(
    plane: ControlPlane, kube_namespace: str, helm: Helm
) -> None:
    """The NOTES name the scale sets that exist: one per variant, never the bare base name
    (ADR 0063), with each variant's container mode."""
    code, output = await _dry_run(
        helm,
        plane.kubeconfig,
        "controllerServiceAccount.name=arcflow-reconciler",
        "controllerServiceAccount.namespace=arc-system",
        "runnerScaleSetName=linux-dind",
        "containerMode.type=dind",
        "runnerVariants[0].name=small",
        "runnerVariants[1].name=gpu",
        "runnerVariants[1].containerMode.type=kubernetes",
        namespace=kube_namespace,
    )
    assert code == 0, output
    notes = output.split("NOTES:", 1)[1]
    assert '"linux-dind-small" (containerMode dind)' in notes
    assert '"linux-dind-gpu" (containerMode kubernetes)' in notes
    assert '"linux-dind"' not in notes
