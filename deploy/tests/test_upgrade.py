"""`helm upgrade` from the previous release to this one on the real control plane keeps the
CRDs and every custom object (docs/deploy.md "Upgrading", ADR 0059).

The previous release is `deploy/tests/previous-charts/` (the 0.1.0 charts packaged from the
commit its README names; CI clones carry no tags). The test installs its CRD chart (taking
over the session's CRDs, as a cluster that ran the CRD chart has them), its umbrella chart and
a two-variant runner set, adds a single-shape AutoscalingRunnerSet of its own, and runs the
reconciler in-process with the settings of the reconciler Deployment the chart installed (a
stand-in registrar answers its RPCs and writes the scale set ids, as in the reconciler's
integration tests), so the listener pod exists. Then it upgrades the three releases to the
working-tree charts and restarts the reconciler with the upgraded Deployment's settings:

- the CRDs are the same objects (uid, creationTimestamp) and carry the new chart's labels
  (templates, not `crds/`, so helm does upgrade them);
- every AutoscalingRunnerSet and EphemeralRunnerSet, and every object the releases own, is the
  same object (uid): nothing deleted or recreated;
- the only objects replaced are the listener's (its AutoscalingListener, pod, RBAC and config
  Secret, which the reconciler recreates when the listener image changes), and the listener
  pod runs the new listener image.

No kubelet or scheduler runs here, so pods stay Pending: the listener pod's spec is what is
checked, not a running listener process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml

from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.common.kube.resources import Resource
from arcflow.common.nats import KV_SCALESETS, ensure_jetstream
from arcflow.common.scaleset_records import record_key
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.nats_server import NatsServer
from arcflow.reconciler.settings import ReconcilerSettings
from deploy.tests.helpers import CRD_DIR, HELM_DIR, VALUES_DIR, Helm
from services.reconciler.tests.reconciler_integration.harness import (
    FakeRegistrarRpc,
    reconciler_runtime,
)
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.manifests import pat_secret
from tests.polling import eventually

pytestmark = pytest.mark.integration

PREVIOUS = Path(__file__).resolve().parent / "previous-charts"
REPO_EXAMPLES = HELM_DIR.parents[1] / "examples"
PREVIOUS_VERSION = "0.1.0"
CRDS = (
    "autoscalingrunnersets.actions.github.com",
    "ephemeralrunnersets.actions.github.com",
    "ephemeralrunners.actions.github.com",
    "autoscalinglisteners.actions.github.com",
)
CRD = "CustomResourceDefinition"
HELM_OWNER_LABEL = "app.kubernetes.io/managed-by"
HELM_ANNOTATIONS = ("meta.helm.sh/release-name", "meta.helm.sh/release-namespace")
SECRET = "github-credentials"  # the values file's githubConfigSecret
#: What the test runs: the chart's ARS (variants cpu and gpu) and one of its own.
SETS = {("linux", "cpu"): 41, ("linux", "gpu"): 42, ("single", ""): 43}
_CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", CRD, "Namespace"}


def _resource(api_version: str, kind: str) -> Resource:
    """Where a kind lives (every kind the charts render has the plural kind + s)."""
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, f"{kind.lower()}s", kind, namespaced=kind not in _CLUSTER_KINDS)


#: The kinds compared before and after, in the runner and the controller namespace.
NAMESPACED_KINDS = tuple(
    _resource(api_version, kind)
    for api_version, kind in (
        ("actions.github.com/v1alpha1", "AutoscalingRunnerSet"),
        ("actions.github.com/v1alpha1", "EphemeralRunnerSet"),
        ("actions.github.com/v1alpha1", "EphemeralRunner"),
        ("actions.github.com/v1alpha1", "AutoscalingListener"),
        ("v1", "Pod"),
        ("v1", "ServiceAccount"),
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    )
)


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> ControlPlane:
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("needs the session's own real kube-apiserver")
    found: ControlPlane = request.getfixturevalue("control_plane")
    return found


@pytest.fixture
async def controller_ns(kube_client: KubeClient, kube_namespace: str) -> AsyncIterator[str]:
    name = f"{kube_namespace}-sys"
    await kube_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFoundError):
        await kube_client.delete("Namespace", name)


async def _helm(helm: Helm, kubeconfig: Path, *args: str) -> str:
    env = {**helm.env, "KUBECONFIG": str(kubeconfig)}
    process = await asyncio.create_subprocess_exec(
        str(helm.binary),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, f"helm {' '.join(args)} failed:\n{out.decode()}{err.decode()}"
    return out.decode()


@contextlib.asynccontextmanager
async def _crds_adopted(kube: KubeClient, release: str, namespace: str) -> AsyncIterator[None]:
    """The session's CRDs as a cluster that installed the CRD chart has them: owned by the
    release (helm adopts objects that carry its labels). Their labels and annotations are put
    back afterwards (the CRDs are kept: helm.sh/resource-policy=keep)."""
    before = {name: (await kube.get(CRD, name))["metadata"] for name in CRDS}
    for name in CRDS:
        await kube.patch_merge(
            CRD,
            name,
            {
                "metadata": {
                    "labels": {HELM_OWNER_LABEL: "Helm"},
                    "annotations": dict(zip(HELM_ANNOTATIONS, (release, namespace), strict=True)),
                }
            },
        )
    try:
        yield
    finally:
        for name, meta in before.items():
            now = (await kube.get(CRD, name))["metadata"]
            restore: dict[str, Any] = {}
            for key in ("labels", "annotations"):
                old = meta.get(key) or {}
                restore[key] = {k: old.get(k) for k in {**old, **(now.get(key) or {})}}
            await kube.patch_merge(CRD, name, {"metadata": restore})


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("ARCFLOW_RECONCILER_")]:
            patch.delenv(key)
        for key, value in values.items():
            patch.setenv(key, value)
        yield


async def _deployment_settings(
    kube: KubeClient, namespace: str, runners: str
) -> ReconcilerSettings:
    """The reconciler's settings as its pod would read them: the ARCFLOW_RECONCILER_* values of
    the installed Deployment (fieldRef ones aside), with test timings, and scoped to this
    test's namespace (the server is shared by the session)."""
    deployment = await kube.get(_resource("apps/v1", "Deployment"), "arcflow-reconciler", namespace)
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {
        e["name"]: e["value"]
        for e in container.get("env") or []
        if e["name"].startswith("ARCFLOW_RECONCILER_") and "value" in e
    }
    with _environment(env):
        settings = ReconcilerSettings()
    return settings.model_copy(
        update={
            "namespaces": [runners],
            "workers": 4,
            "retry_base_seconds": 0.05,
            "retry_cap_seconds": 0.5,
            "resync_interval_seconds": 2.0,
            "fetch_timeout_seconds": 0.2,
            "rpc_timeout_seconds": 2,
            "pending_status_delay_seconds": 0.0,
            "status_interval_seconds": 1.0,
        }
    )


async def _register(nc: Any, namespace: str) -> None:
    """What the registrar writes once it registered each variant's scale set."""
    kv = await nc.jetstream().key_value(KV_SCALESETS.bucket)
    for (ars, variant), scale_set_id in SETS.items():
        record = {
            "namespace": namespace,
            "ars": ars,
            "variant": variant,
            "scale_set_id": scale_set_id,
            "scale_set_name": f"{ars}-{variant}" if variant else ars,
            "runner_group_id": 1,
            "runner_group_name": "Default",
            "github_config_url": "https://github.com/example-org",
            "github_config_secret": SECRET,
        }
        await kv.put(record_key(namespace, ars, variant), json.dumps(record).encode())


async def _objects(kube: KubeClient, namespaces: list[str]) -> dict[tuple[str, str, str], Any]:
    found: dict[tuple[str, str, str], Any] = {}
    for namespace in namespaces:
        for res in NAMESPACED_KINDS:
            for obj in (await kube.list(res, namespace=namespace)).items:
                found[(res.kind, namespace, obj["metadata"]["name"])] = obj
    for name in CRDS:
        found[(CRD, "", name)] = await kube.get(CRD, name)
    return found


async def _listener_pods(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return [
        pod
        for pod in (await kube.list("Pod", namespace=namespace)).items
        if any(
            ref.get("kind") == "AutoscalingListener"
            for ref in pod["metadata"].get("ownerReferences") or []
        )
        and not pod["metadata"].get("deletionTimestamp")
    ]


async def _listener_images(kube: KubeClient, namespace: str) -> dict[str, str]:
    """ARS name -> the image of its listener pod's `listener` container."""
    images: dict[str, str] = {}
    for pod in await _listener_pods(kube, namespace):
        ars = pod["metadata"].get("labels", {}).get("actions.github.com/scale-set-name", "")
        [container] = [c for c in pod["spec"]["containers"] if c["name"] == "listener"]
        images[ars] = container["image"]
    return images


@contextlib.asynccontextmanager
async def _reconciler(
    nats_url: str, kube: KubeClient, settings: ReconcilerSettings
) -> AsyncIterator[ServiceRuntime]:
    runtime: ServiceRuntime = reconciler_runtime(nats_url, kube, settings)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


async def test_upgrade_from_the_previous_release_keeps_crds_and_objects(
    plane: ControlPlane,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_ns: str,
    private_nats_server: NatsServer,
    helm: Helm,
) -> None:
    kube, runners, ctl, kubeconfig = kube_client, kube_namespace, controller_ns, plane.kubeconfig
    new_version = str(yaml.safe_load((HELM_DIR / "arcflow" / "Chart.yaml").read_text())["version"])
    assert new_version != PREVIOUS_VERSION
    runner_set_args = (
        "--namespace", runners,
        "--values", str(VALUES_DIR / "runner-set" / "two-variants.yaml"),
        "--set", "controllerServiceAccount.name=arcflow-reconciler",
        "--set", f"controllerServiceAccount.namespace={ctl}",
    )  # fmt: skip
    releases = [("arc-runner-set", runners), ("arcflow", ctl), ("arcflow-crds", ctl)]
    nc = await nats.connect(private_nats_server.url)
    try:
        await ensure_jetstream(nc.jetstream())
        rpc = FakeRegistrarRpc(nc)
        await rpc.start()
        async with _crds_adopted(kube, "arcflow-crds", ctl):
            # --- the previous release, as a cluster runs it ------------------------------
            await _helm(
                helm, kubeconfig, "install", "arcflow-crds",
                str(PREVIOUS / f"arcflow-crds-{PREVIOUS_VERSION}.tgz"), "--namespace", ctl,
            )  # fmt: skip
            await _helm(
                helm, kubeconfig, "install", "arcflow",
                str(PREVIOUS / f"arcflow-{PREVIOUS_VERSION}.tgz"), "--namespace", ctl,
                "--set", "crds.enabled=false",
            )  # fmt: skip
            await kube.create(pat_secret(SECRET, runners, "ghp_not_a_real_token"))
            await _helm(
                helm, kubeconfig, "install", "arc-runner-set",
                str(PREVIOUS / f"arcflow-runner-set-{PREVIOUS_VERSION}.tgz"), *runner_set_args,
            )  # fmt: skip
            single = yaml.safe_load((REPO_EXAMPLES / "01-single-scale-set.yaml").read_text())
            single["metadata"] = {"name": "single", "namespace": runners}
            single["spec"]["githubConfigSecret"] = SECRET
            await kube.create(single)
            await _register(nc, runners)

            old_image = f"ghcr.io/arcflow/listener:{PREVIOUS_VERSION}"
            new_image = f"ghcr.io/arcflow/listener:{new_version}"
            settings = await _deployment_settings(kube, ctl, runners)
            assert settings.listener_image == old_image
            assert settings.controller_namespace == ctl

            async def listeners_on(image: str) -> bool:
                images = await _listener_images(kube, ctl)
                assert images == {"linux": image, "single": image}, images
                return True

            async with _reconciler(private_nats_server.url, kube, settings):
                await eventually(
                    lambda: listeners_on(old_image), within=120, what="listener pods of 0.1.0"
                )
            before = await _objects(kube, [runners, ctl])
            ers_before = {k for k in before if k[0] == "EphemeralRunnerSet"}
            assert len(ers_before) == 3  # cpu, gpu and the single set's

            # --- the upgrade: CRDs first, then the controller, then the runner set --------
            await _helm(
                helm, kubeconfig, "upgrade", "arcflow-crds", str(HELM_DIR / "arcflow-crds"),
                "--namespace", ctl,
            )  # fmt: skip
            await _helm(
                helm, kubeconfig, "upgrade", "arcflow", str(HELM_DIR / "arcflow"),
                "--namespace", ctl, "--set", "crds.enabled=false",
            )  # fmt: skip
            await _helm(
                helm, kubeconfig, "upgrade", "arc-runner-set",
                str(HELM_DIR / "arcflow-runner-set"), *runner_set_args,
            )  # fmt: skip
            for release, namespace in releases:
                status = await _helm(
                    helm, kubeconfig, "list", "--namespace", namespace, "--filter", f"^{release}$",
                    "--output", "yaml",
                )  # fmt: skip
                [listed] = yaml.safe_load(status)
                assert listed["chart"].endswith(f"-{new_version}"), listed
                assert listed["status"] == "deployed", listed

            upgraded = await _deployment_settings(kube, ctl, runners)
            assert upgraded.listener_image == new_image
            async with _reconciler(private_nats_server.url, kube, upgraded):
                await eventually(
                    lambda: listeners_on(new_image),
                    within=120,
                    what="listener pods on the new image",
                )
            after = await _objects(kube, [runners, ctl])

            # --- what was kept -------------------------------------------------------------
            for name in CRDS:
                old, new = before[(CRD, "", name)], after[(CRD, "", name)]
                assert new["metadata"]["uid"] == old["metadata"]["uid"], name
                assert new["metadata"]["creationTimestamp"] == old["metadata"]["creationTimestamp"]
                labels = new["metadata"]["labels"]
                assert labels["helm.sh/chart"] == f"arcflow-crds-{new_version}", name
                assert labels["app.kubernetes.io/version"] == new_version, name
                # the schema served is the working tree's (upgraded, not left at install time)
                [plural, _] = name.split(".", 1)
                shipped = yaml.safe_load(
                    (CRD_DIR / f"actions.github.com_{plural}.yaml").read_text()
                )
                assert [v["schema"] for v in new["spec"]["versions"]] == [
                    v["schema"] for v in shipped["spec"]["versions"]
                ], name
                assert new["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", (
                    "the CRDs must survive an uninstall"
                )

            kept_kinds = ("AutoscalingRunnerSet", "EphemeralRunnerSet")
            for key, old in before.items():
                if key[0] in kept_kinds:
                    assert key in after, f"{key} was deleted"
                    assert after[key]["metadata"]["uid"] == old["metadata"]["uid"], (
                        f"{key} was recreated"
                    )
            assert {k for k in after if k[0] == "EphemeralRunnerSet"} == ers_before

            # every object of the releases: the same objects, none deleted
            for release, namespace in releases:
                manifest = await _helm(
                    helm, kubeconfig, "get", "manifest", release, "--namespace", namespace
                )
                docs = [d for d in yaml.safe_load_all(manifest) if d]
                assert docs, release
                for doc in docs:
                    res = _resource(doc["apiVersion"], doc["kind"])
                    name = doc["metadata"]["name"]
                    ns = doc["metadata"].get("namespace") or namespace if res.namespaced else ""
                    live = await kube.get(res, name, ns or None)
                    old = before.get((doc["kind"], ns, name))
                    if old is not None:
                        assert live["metadata"]["uid"] == old["metadata"]["uid"], (
                            f"{release}: {doc['kind']} {name} was recreated"
                        )

            # what was replaced: the listener's objects only
            replaced = {
                key
                for key, old in before.items()
                if key not in after or after[key]["metadata"]["uid"] != old["metadata"]["uid"]
            }
            listener_names = {k[2] for k in before if k[0] == "AutoscalingListener"}
            assert {k[0] for k in replaced} >= {"AutoscalingListener", "Pod"}
            for kind, namespace, name in replaced:
                # the listener's pod, config Secret, ServiceAccount, Role and RoleBinding (the
                # Role and RoleBinding in the runner namespace, where its sets are)
                assert any(name.startswith(listener) for listener in listener_names), (
                    f"{kind} {namespace}/{name} was replaced and is not a listener's"
                )
    finally:
        for release, namespace in releases:
            with contextlib.suppress(AssertionError):
                await _helm(helm, kubeconfig, "uninstall", release, "--namespace", namespace)
        await nc.drain()
    # the CRDs outlive the CRD release
    for name in CRDS:
        await kube.get(CRD, name)
