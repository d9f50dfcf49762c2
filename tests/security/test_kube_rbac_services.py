"""The watcher's, registrar's and reconciler's Kubernetes identities, rendered from the umbrella
chart with helm and applied to a real API server: what each service does is allowed, what it
has no business with is refused with 403.

Each allowed request really lands (the world shows it) and each denial is a real request
answered 403 with the world unchanged, so a test fails when a chart grants too little or too
much. ``SelfSubjectAccessReview`` is only a complement to those requests.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.builders import listener_role_rules
from arcflow.common.kube import (
    ARC_RESOURCES,
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    CUSTOM_RESOURCE_DEFINITION,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    NAMESPACE,
    POD,
    RESOURCE_QUOTA,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    ForbiddenError,
    KubeClient,
    NotFoundError,
)

from .kube_identities import (
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    Identity,
    KubeIdentities,
    access_allowed,
    open_identities,
)

pytestmark = pytest.mark.integration

GROUP_VERSION = "actions.github.com/v1alpha1"
TEMPLATE = {"spec": {"containers": [{"name": "runner", "image": "runner:latest"}]}}


@dataclass
class Release:
    """One release of the chart: its namespace, the namespaces it manages, an identity each."""

    identities: dict[str, Identity]
    namespace: str  # release (and controller) namespace
    runners: str  # where ARSs live
    elsewhere: str  # a namespace the release has no business in (when namespace-scoped)


@pytest.fixture
def identities(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeIdentities]:
    with open_identities(request, tmp_path / "identities") as ids:
        yield ids


def _release(identities: KubeIdentities, *, scoped: bool) -> Release:
    suffix = secrets.token_hex(3)
    namespace = identities.namespace(f"rbac-sys-{suffix}")
    runners = identities.namespace(f"rbac-runners-{suffix}")
    elsewhere = identities.namespace(f"rbac-elsewhere-{suffix}")
    services = identities.from_charts(
        release=f"rbac-{suffix}",
        namespace=namespace,
        namespaces=[runners] if scoped else None,
    )
    return Release(services, namespace, runners, elsewhere)


@pytest.fixture
def cluster_wide(identities: KubeIdentities) -> Release:
    """The charts' default: ClusterRoles."""
    return _release(identities, scoped=False)


@pytest.fixture
def scoped(identities: KubeIdentities) -> Release:
    """``rbac.clusterWide=false`` with one runner namespace: Roles there (and, for the
    reconciler, in the release namespace, where listener pods live)."""
    return _release(identities, scoped=True)


def _ars(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "githubConfigUrl": "https://github.com/my-org",
            "githubConfigSecret": "github-creds",
            "template": TEMPLATE,
        },
    }


def _ers(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "rbac-test"}},
        "spec": {
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": "https://github.com/my-org",
                "githubConfigSecret": "github-creds",
                "runnerScaleSetId": 1,
                **TEMPLATE,
            },
        },
    }


def _secret(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"github_token": "placeholder"},
    }


def _pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _cluster_role(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }


async def _seed(kube: KubeClient, namespace: str) -> None:
    """As the admin: an ARS, one of its sets, its credentials Secret and a CA ConfigMap."""
    await kube.create(_ars("seed", namespace))
    await kube.create(_ers("seed", namespace))
    await kube.create(_secret("github-creds", namespace))
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "github-ca", "namespace": namespace},
            "data": {"ca.crt": "placeholder"},
        }
    )


async def _first_watch_event(kube: KubeClient, resource: Any, **kwargs: Any) -> str:
    """Open a watch and return the type of its first event (an ADDED for an existing object)."""
    async with kube.watch(resource, timeout_seconds=5, **kwargs) as stream:
        async for event in stream:
            return str(event.type)
    return ""


# --- watcher ---------------------------------------------------------------------------------


async def test_watcher_lists_and_watches_what_it_watches(
    cluster_wide: Release, kube_client: KubeClient
) -> None:
    await _seed(kube_client, cluster_wide.runners)
    async with await cluster_wide.identities["watcher"].client() as kube:
        for resource in (*ARC_RESOURCES, POD, SECRET):
            await kube.list(resource)  # every namespace, as it runs cluster-wide
        listed = await kube.list(AUTOSCALING_RUNNER_SET, namespace=cluster_wide.runners)
        assert [o["metadata"]["name"] for o in listed.items] == ["seed"]
        for resource in (AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET, SECRET):
            assert await _first_watch_event(kube, resource, namespace=cluster_wide.runners) == (
                "ADDED"
            )


async def test_watcher_writes_nothing(cluster_wide: Release, kube_client: KubeClient) -> None:
    ns = cluster_wide.runners
    await _seed(kube_client, ns)
    async with await cluster_wide.identities["watcher"].client() as kube:
        for manifest in (_ars("mine", ns), _ers("mine", ns), _secret("mine", ns), _pod("mine", ns)):
            with pytest.raises(ForbiddenError):
                await kube.create(manifest)
        with pytest.raises(ForbiddenError):
            await kube.patch_merge(
                EPHEMERAL_RUNNER_SET, "seed", {"spec": {"replicas": 3}}, namespace=ns
            )
        with pytest.raises(ForbiddenError):
            await kube.patch_status(AUTOSCALING_RUNNER_SET, "seed", {"phase": "x"}, namespace=ns)
        for resource, name in ((EPHEMERAL_RUNNER_SET, "seed"), (SECRET, "github-creds")):
            with pytest.raises(ForbiddenError):
                await kube.delete(resource, name, namespace=ns)
        with pytest.raises(ForbiddenError):
            await kube.list(CONFIG_MAP, namespace=ns)
        assert not await access_allowed(kube, "create", EPHEMERAL_RUNNER_SET, namespace=ns)
    ers = await kube_client.get(EPHEMERAL_RUNNER_SET, "seed", ns)
    assert "replicas" not in ers["spec"]
    await kube_client.get(SECRET, "github-creds", ns)
    for resource in (AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET, SECRET, POD):
        names = [
            o["metadata"]["name"] for o in (await kube_client.list(resource, namespace=ns)).items
        ]
        assert "mine" not in names


async def test_scoped_watcher_sees_only_its_namespaces(
    scoped: Release, kube_client: KubeClient
) -> None:
    await _seed(kube_client, scoped.runners)
    await _seed(kube_client, scoped.elsewhere)
    async with await scoped.identities["watcher"].client() as kube:
        listed = await kube.list(AUTOSCALING_RUNNER_SET, namespace=scoped.runners)
        assert [o["metadata"]["name"] for o in listed.items] == ["seed"]
        for namespace in (scoped.elsewhere, None):  # another namespace; every namespace
            with pytest.raises(ForbiddenError):
                await kube.list(AUTOSCALING_RUNNER_SET, namespace=namespace)
            with pytest.raises(ForbiddenError):
                await kube.list(SECRET, namespace=namespace)


# --- registrar -------------------------------------------------------------------------------


async def test_registrar_reads_what_it_registers(
    cluster_wide: Release, kube_client: KubeClient
) -> None:
    """What its code reads: ARSs (get, list, watch), their sets and runners by label, the
    credentials Secret and the CA ConfigMap an ARS names (from a watch of that one object)."""
    ns = cluster_wide.runners
    await _seed(kube_client, ns)
    async with await cluster_wide.identities["registrar"].client() as kube:
        assert (await kube.get(AUTOSCALING_RUNNER_SET, "seed", ns))["metadata"]["name"] == "seed"
        assert [o["metadata"]["name"] for o in (await kube.list(AUTOSCALING_RUNNER_SET)).items]
        assert await _first_watch_event(kube, AUTOSCALING_RUNNER_SET) == "ADDED"
        by_label = await kube.list(
            EPHEMERAL_RUNNER_SET, namespace=ns, label_selector="app=rbac-test"
        )
        assert [o["metadata"]["name"] for o in by_label.items] == ["seed"]
        await kube.list(EPHEMERAL_RUNNER, namespace=ns, label_selector="app=rbac-test")
        secret = await kube.get(SECRET, "github-creds", ns)
        assert "github_token" in secret["data"]
        one = "metadata.name=github-creds"
        assert await _first_watch_event(kube, SECRET, namespace=ns, field_selector=one) == "ADDED"
        one_ca = "metadata.name=github-ca"
        assert await _first_watch_event(kube, CONFIG_MAP, namespace=ns, field_selector=one_ca) == (
            "ADDED"
        )


async def test_registrar_writes_nothing(cluster_wide: Release, kube_client: KubeClient) -> None:
    """Its state lives in NATS: no pod, Secret or set of its own, no edit or delete of any."""
    ns = cluster_wide.runners
    await _seed(kube_client, ns)
    async with await cluster_wide.identities["registrar"].client() as kube:
        for manifest in (_pod("mine", ns), _secret("mine", ns), _ers("mine", ns)):
            with pytest.raises(ForbiddenError):
                await kube.create(manifest)
        with pytest.raises(ForbiddenError):
            await kube.patch_merge(SECRET, "github-creds", {"stringData": {"x": "y"}}, namespace=ns)
        with pytest.raises(ForbiddenError):
            await kube.patch_merge(
                AUTOSCALING_RUNNER_SET,
                "seed",
                {"metadata": {"annotations": {"rbac-test": "x"}}},
                namespace=ns,
            )
        for resource, name in ((EPHEMERAL_RUNNER_SET, "seed"), (SECRET, "github-creds")):
            with pytest.raises(ForbiddenError):
                await kube.delete(resource, name, namespace=ns)
        assert not await access_allowed(kube, "delete", EPHEMERAL_RUNNER_SET, namespace=ns)
    await kube_client.get(EPHEMERAL_RUNNER_SET, "seed", ns)
    secret = await kube_client.get(SECRET, "github-creds", ns)
    assert set(secret["data"]) == {"github_token"}
    ars = await kube_client.get(AUTOSCALING_RUNNER_SET, "seed", ns)
    assert "rbac-test" not in (ars["metadata"].get("annotations") or {})
    with pytest.raises(NotFoundError):
        await kube_client.get(POD, "mine", ns)


async def test_scoped_registrar_reads_no_secret_elsewhere(
    scoped: Release, kube_client: KubeClient
) -> None:
    await _seed(kube_client, scoped.runners)
    await _seed(kube_client, scoped.elsewhere)
    async with await scoped.identities["registrar"].client() as kube:
        await kube.get(SECRET, "github-creds", scoped.runners)
        with pytest.raises(ForbiddenError):
            await kube.get(SECRET, "github-creds", scoped.elsewhere)
        with pytest.raises(ForbiddenError):
            await kube.list(SECRET)


# --- reconciler ------------------------------------------------------------------------------


async def test_reconciler_writes_what_it_owns(
    cluster_wide: Release, kube_client: KubeClient
) -> None:
    """A listener's whole bundle and a runner's objects, as the reconciler writes them: the
    Role passes the API server's escalation check because the reconciler holds its rules."""
    ns, sys_ns = cluster_wide.runners, cluster_wide.namespace
    await _seed(kube_client, ns)
    async with await cluster_wide.identities["reconciler"].client() as kube:
        await kube.create(_ers("made", ns))
        await kube.patch_merge(
            EPHEMERAL_RUNNER_SET, "made", {"spec": {"replicas": 2}}, namespace=ns
        )
        await kube.patch_status(AUTOSCALING_RUNNER_SET, "seed", {"phase": "made"}, namespace=ns)
        await kube.create(_secret("made-jit", ns))
        await kube.create(_pod("made", ns))
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "made", "namespace": sys_ns},
            }
        )
        await kube.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "made", "namespace": ns},
                "rules": listener_role_rules(["made"]),
            }
        )
        await kube.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "made", "namespace": ns},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "made",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "made", "namespace": sys_ns}],
            }
        )
        await kube.emit_event(await kube.get(EPHEMERAL_RUNNER_SET, "made", ns), "Made", "by test")
        await kube.get(CONFIG_MAP, "github-ca", ns)
        await kube.list(RESOURCE_QUOTA, namespace=ns)  # capacity.fromResourceQuota (ADR 0062)
        await kube.delete(POD, "made", namespace=ns)
        await kube.delete(SECRET, "made-jit", namespace=ns)
    assert (await kube_client.get(EPHEMERAL_RUNNER_SET, "made", ns))["spec"]["replicas"] == 2
    assert (await kube_client.get(AUTOSCALING_RUNNER_SET, "seed", ns))["status"]["phase"] == "made"
    await kube_client.get(SERVICE_ACCOUNT, "made", sys_ns)
    assert (await kube_client.get(ROLE, "made", ns))["rules"] == listener_role_rules(["made"])
    await kube_client.get(ROLE_BINDING, "made", ns)


async def test_reconciler_cannot_escalate_or_go_cluster_wide(
    cluster_wide: Release, kube_client: KubeClient
) -> None:
    """No ClusterRoles or bindings, no Role wider than itself, no binding to a role it does not
    hold (no ``bind``/``escalate``), no namespaces, CRDs or ConfigMap writes."""
    ns, name = cluster_wide.runners, f"rbac-escape-{secrets.token_hex(3)}"
    async with await cluster_wide.identities["reconciler"].client() as kube:
        with pytest.raises(ForbiddenError):
            await kube.create(_cluster_role(name))
        with pytest.raises(ForbiddenError):
            await kube.create(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
                }
            )
        with pytest.raises(ForbiddenError):  # escalation: a Role granting what it lacks
            await kube.create(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": ns},
                    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
                }
            )
        with pytest.raises(ForbiddenError):  # bind: a RoleBinding to cluster-admin
            await kube.create(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
                }
            )
        with pytest.raises(ForbiddenError):
            await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        with pytest.raises(ForbiddenError):
            await kube.delete(NAMESPACE, ns)
        with pytest.raises(ForbiddenError):
            await kube.list(CUSTOM_RESOURCE_DEFINITION)
        with pytest.raises(ForbiddenError):
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns},
                }
            )
        with pytest.raises(ForbiddenError):
            await kube.list(CONFIG_MAP, namespace=ns)
        with pytest.raises(ForbiddenError):  # quotas are read, never written
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"hard": {"pods": "1"}},
                }
            )
        for verb in ("bind", "escalate"):
            assert not await access_allowed(kube, verb, ROLE, namespace=ns)
    for resource in (CLUSTER_ROLE, CLUSTER_ROLE_BINDING):
        with pytest.raises(NotFoundError):
            await kube_client.get(resource, name)
    for resource in (ROLE, ROLE_BINDING):
        with pytest.raises(NotFoundError):
            await kube_client.get(resource, name, ns)
    with pytest.raises(NotFoundError):
        await kube_client.get(NAMESPACE, name)


async def test_reconciler_may_not_update(cluster_wide: Release, kube_client: KubeClient) -> None:
    """Issue 33: the reconciler never sends a PUT (its writes are creates, merge patches and
    deletes), so its Role grants no ``update`` but on ``*/finalizers`` (what the owner
    references admission plugin checks for ``blockOwnerDeletion``). A PUT is refused."""
    ns = cluster_wide.runners
    await _seed(kube_client, ns)
    async with await cluster_wide.identities["reconciler"].client() as kube:
        seed = await kube.get(AUTOSCALING_RUNNER_SET, "seed", ns)
        with pytest.raises(ForbiddenError):
            await kube.replace(seed, namespace=ns)
        for resource in (*ARC_RESOURCES, POD, SECRET, SERVICE_ACCOUNT, ROLE, ROLE_BINDING):
            assert not await access_allowed(kube, "update", resource, namespace=ns), resource
        for resource in ARC_RESOURCES:
            assert not await access_allowed(
                kube, "update", resource, namespace=ns, subresource="status"
            ), resource
            assert await access_allowed(
                kube, "update", resource, namespace=ns, subresource="finalizers"
            ), resource
            assert await access_allowed(kube, "patch", resource, namespace=ns), resource


async def test_scoped_reconciler_writes_only_where_it_manages(
    scoped: Release, kube_client: KubeClient
) -> None:
    """Namespace-scoped: the runner namespace and the controller namespace, nothing else."""
    async with await scoped.identities["reconciler"].client() as kube:
        await kube.create(_secret("made", scoped.runners))
        await kube.create(_secret("made", scoped.namespace))  # listener config Secrets go here
        with pytest.raises(ForbiddenError):
            await kube.create(_secret("made", scoped.elsewhere))
        with pytest.raises(ForbiddenError):
            await kube.get(SECRET, "made", scoped.elsewhere)
        with pytest.raises(ForbiddenError):
            await kube.create(_pod("made", scoped.elsewhere))
        with pytest.raises(ForbiddenError):
            await kube.list(SECRET)
        await kube.list(RESOURCE_QUOTA, namespace=scoped.runners)
        with pytest.raises(ForbiddenError):
            await kube.list(RESOURCE_QUOTA, namespace=scoped.elsewhere)
    await kube_client.get(SECRET, "made", scoped.runners)
    await kube_client.get(SECRET, "made", scoped.namespace)
    with pytest.raises(NotFoundError):
        await kube_client.get(SECRET, "made", scoped.elsewhere)
