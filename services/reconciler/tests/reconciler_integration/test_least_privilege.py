"""The reconciler with the chart's least-privilege identity on the real server: no ``bind`` or
``escalate`` verb, so the RBAC authorizer lets it create the listener's RoleBinding only once
the Role it names exists (the reconciler must then hold every permission the Role grants).
A RoleBinding created together with its Role was refused and left to a retry; every write of
a run is accepted now (no failed listener pass)."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

from .harness import ars_manifest, build_stack, ensure_namespace, metric_total

pytestmark = pytest.mark.integration

SERVICE_TPL = Path(__file__).parents[4] / "deploy/helm/arcflow-reconciler/templates/_service.tpl"


def chart_rules() -> list[dict[str, Any]]:
    """The reconciler's rules as its chart renders them (a fixed block in ``_service.tpl``)."""
    text = SERVICE_TPL.read_text()
    found = re.search(
        r'{{- define "arcflow-reconciler.rules" -}}\n(.*?){{- end -}}', text, re.DOTALL
    )
    assert found, f"no arcflow-reconciler.rules block in {SERVICE_TPL.name}"
    rules: list[dict[str, Any]] = yaml.safe_load(found.group(1))
    assert not any({"bind", "escalate", "*"} & set(r["verbs"]) for r in rules)
    return rules


@pytest.fixture
def least_privilege(
    control_plane: ControlPlane, on_real_server: bool, kube_namespace: str
) -> Iterator[str]:
    """A token of a ServiceAccount bound cluster-wide to a copy of the chart's rules."""
    if not on_real_server:
        pytest.skip("RBAC needs the real server")
    name = f"arcflow-reconciler-{secrets.token_hex(3)}"
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    control_plane.request(
        "POST",
        f"/api/v1/namespaces/{kube_namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reconciler"}},
    )
    control_plane.request(
        "POST",
        f"{rbac}/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": chart_rules(),
        },
    )
    control_plane.request(
        "POST",
        f"{rbac}/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "reconciler", "namespace": kube_namespace}
            ],
        },
    )
    token = control_plane.create_token(kube_namespace, "reconciler")
    try:
        yield token
    finally:
        control_plane.request("DELETE", f"{rbac}/clusterrolebindings/{name}")
        control_plane.request("DELETE", f"{rbac}/clusterroles/{name}")


@pytest.fixture
async def recorder(control_plane: ControlPlane) -> AsyncIterator[KubeFaultProxy]:
    """Passes the reconciler's requests (its own token) through and records their order."""
    async with KubeFaultProxy.for_control_plane(control_plane) as proxy:
        yield proxy


@pytest.fixture
async def reconciler_kube(
    least_privilege: str, recorder: KubeFaultProxy, tmp_path: Path
) -> AsyncIterator[KubeClient]:
    kubeconfig = recorder.write_kubeconfig(tmp_path / "reconciler", token=least_privilege)
    client = await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000, request_timeout=10)
    )
    async with client:
        yield client


def _errors(reader: InMemoryMetricReader, kind: str) -> int:
    return metric_total(reader, "arcflow_reconciler_errors", kind=kind)


async def test_the_listener_rbac_is_created_without_a_refusal(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    reconciler_kube: KubeClient,
    recorder: KubeFaultProxy,
    kube_namespace: str,
    reader: InMemoryMetricReader,
) -> None:
    controller_namespace = f"{kube_namespace}-systems"
    await ensure_namespace(kube_client, controller_namespace)  # the chart's, made by the admin
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    async with build_stack(
        private_nats_server.url,
        reconciler_kube,
        kube_namespace,
        meter=meter,
        controller_namespace=controller_namespace,
    ) as stack:
        await stack.register("lp", "", 7)
        await stack.apply_ars(ars_manifest(kube_namespace, "lp"))

        async def listener_pod() -> bool:
            mine = [
                p
                for p in await stack.list("Pod", stack.controller_namespace)
                if p["metadata"]["name"].startswith("lp-")
            ]
            bindings = await stack.list("RoleBinding")
            assert mine, "no listener pod yet"
            assert bindings, "no listener RoleBinding yet"
            return True

        await eventually(listener_pod, within=20, what="the listener pod and its RoleBinding")
        await stack.wait_idle()
        # The order the API server saw: the Role was created before the RoleBinding was first
        # asked for (the authorizer refuses a binding to a Role it cannot see). A failed pass
        # alone proves nothing on a loaded machine: the authorizer's view of a Role that was
        # just created can lag, and the pass is then retried.
        posts = [r for r in recorder.requests if r.method == "POST"]
        role = next(i for i, r in enumerate(posts) if r.path.endswith("/roles") and r.status == 201)
        binding = next(i for i, r in enumerate(posts) if r.path.endswith("/rolebindings"))
        assert role < binding, "the RoleBinding was asked for before its Role existed"
        assert _errors(reader, "ars") == 0
