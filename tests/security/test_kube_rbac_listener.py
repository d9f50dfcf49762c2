"""The listener's Kubernetes identity, exactly as the reconciler builds it, on a real API server:
it may patch its own EphemeralRunnerSets' replicas and EphemeralRunner status, and nothing else.

Every denial is a real request refused with 403 (and the object unchanged afterwards); every
allowed action is a real request that lands, so each test could fail both ways.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.builders import BuildSettings, build_ephemeral_runner, desired_runner_sets
from arcflow.common.kube import (
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    SECRET,
    ForbiddenError,
    KubeClient,
)
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.naming import listener_config_secret_name

from .kube_identities import Identity, KubeIdentities, access_allowed, open_identities

pytestmark = pytest.mark.integration

IDS = {"cpu": 101, "gpu": 102}


def _ars(name: str, namespace: str, variants: list[str]) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "runner", "image": "runner:latest"}]}}
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "githubConfigUrl": "https://github.com/my-org",
            "githubConfigSecret": "github-creds",
            "template": template,
            "runnerVariants": [{"name": v, "template": template} for v in variants],
        },
    }


def _unguarded(doc: dict[str, Any]) -> dict[str, Any]:
    """A test object without finalizers: no controller runs here to remove them, and the
    namespace must be deletable afterwards."""
    doc["metadata"].pop("finalizers", None)
    return doc


async def _runner_sets(
    kube: KubeClient, ars: dict[str, Any], settings: BuildSettings
) -> list[dict[str, Any]]:
    """``ars`` and its EphemeralRunnerSets, created as the admin (as the reconciler would)."""
    created = await kube.create(ars)
    model = AutoscalingRunnerSet.from_manifest(created)
    return [
        await kube.create(_unguarded(ers))
        for ers in desired_runner_sets(model, {k: IDS[k] for k in IDS}, settings)
        if ers["metadata"]["name"] in {f"{ars['metadata']['name']}-{v}" for v in IDS}
    ]


@dataclass
class ListenerWorld:
    listener: Identity
    namespace: str  # the ARS namespace
    controller_namespace: str
    other_namespace: str
    own_sets: list[str]
    other_set: str  # another ARS's ERS, same namespace
    runner: str  # an EphemeralRunner of the listener's first ERS


@pytest.fixture
def identities(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeIdentities]:
    with open_identities(request, tmp_path / "identities") as ids:
        yield ids


@pytest.fixture
async def world(identities: KubeIdentities, kube_client: KubeClient) -> ListenerWorld:
    suffix = secrets.token_hex(3)
    ns = identities.namespace(f"rbac-runners-{suffix}")
    controller_ns = identities.namespace(f"rbac-sys-{suffix}")
    other_ns = identities.namespace(f"rbac-other-{suffix}")
    settings = BuildSettings(controller_namespace=controller_ns, listener_image="listener:test")
    alpha = _ars("alpha", ns, ["cpu", "gpu"])
    listener = identities.listener(alpha, IDS, settings)
    own = await _runner_sets(kube_client, alpha, settings)
    beta = await _runner_sets(kube_client, _ars("beta", ns, ["cpu"]), settings)
    # The same names as the listener's own sets, in a namespace it has no Role in.
    await _runner_sets(kube_client, _ars("alpha", other_ns, ["cpu", "gpu"]), settings)
    runner = await kube_client.create(_unguarded(build_ephemeral_runner(own[0], settings)))
    return ListenerWorld(
        listener=listener,
        namespace=ns,
        controller_namespace=controller_ns,
        other_namespace=other_ns,
        own_sets=[s["metadata"]["name"] for s in own],
        other_set=beta[0]["metadata"]["name"],
        runner=runner["metadata"]["name"],
    )


async def _replicas(kube: KubeClient, name: str, namespace: str) -> int:
    ers = await kube.get(EPHEMERAL_RUNNER_SET, name, namespace)
    return int((ers.get("spec") or {}).get("replicas") or 0)


def test_listener_bundle_is_the_reconcilers(world: ListenerWorld) -> None:
    """The identity under test is the builders' bundle: its SA in the controller namespace, a
    Role over exactly the two variants' sets in the ARS namespace."""
    kinds = {o["kind"]: o for o in world.listener.objects}
    assert set(kinds) == {"ServiceAccount", "Role", "RoleBinding"}
    assert world.listener.namespace == world.controller_namespace
    assert kinds["Role"]["metadata"]["namespace"] == world.namespace
    assert (
        kinds["Role"]["rules"][0]["resourceNames"] == world.own_sets == ["alpha-cpu", "alpha-gpu"]
    )


async def test_listener_patches_its_own_sets_and_runner_status(
    world: ListenerWorld, kube_client: KubeClient
) -> None:
    async with world.listener.lite_client() as lite:
        for replicas, name in enumerate(world.own_sets, start=2):
            patch = {"spec": {"replicas": replicas, "patchID": 1}}
            await lite.patch_merge(EPHEMERAL_RUNNER_SET, name, patch, namespace=world.namespace)
        await lite.patch_status(
            EPHEMERAL_RUNNER,
            world.runner,
            {"jobRepositoryName": "my-org/app"},
            namespace=world.namespace,
        )
    for replicas, name in enumerate(world.own_sets, start=2):
        assert await _replicas(kube_client, name, world.namespace) == replicas
    runner = await kube_client.get(EPHEMERAL_RUNNER, world.runner, world.namespace)
    assert runner["status"]["jobRepositoryName"] == "my-org/app"


async def test_listener_cannot_patch_another_sets_replicas(
    world: ListenerWorld, kube_client: KubeClient
) -> None:
    patch = {"spec": {"replicas": 7, "patchID": 1}}
    async with world.listener.lite_client() as lite:
        with pytest.raises(ForbiddenError) as refused:
            await lite.patch_merge(
                EPHEMERAL_RUNNER_SET, world.other_set, patch, namespace=world.namespace
            )
    assert refused.value.status == 403
    assert await _replicas(kube_client, world.other_set, world.namespace) == 0


async def test_listener_cannot_touch_another_namespace(
    world: ListenerWorld, kube_client: KubeClient
) -> None:
    """Sets of the very same names, one namespace over: refused."""
    patch = {"spec": {"replicas": 7, "patchID": 1}}
    async with world.listener.lite_client() as lite:
        for name in world.own_sets:
            with pytest.raises(ForbiddenError):
                await lite.patch_merge(
                    EPHEMERAL_RUNNER_SET, name, patch, namespace=world.other_namespace
                )
            assert await _replicas(kube_client, name, world.other_namespace) == 0


async def test_listener_cannot_read_secrets(world: ListenerWorld, kube_client: KubeClient) -> None:
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "github-creds", "namespace": world.namespace},
            "stringData": {"github_token": "not-for-the-listener"},
        }
    )
    async with await world.listener.client() as kube:
        for namespace in (world.namespace, world.controller_namespace):
            with pytest.raises(ForbiddenError):
                await kube.list(SECRET, namespace=namespace)
        with pytest.raises(ForbiddenError):
            await kube.get(SECRET, "github-creds", world.namespace)
        # Its own config Secret (in the controller namespace) reaches it as a mounted file,
        # never through the API.
        with pytest.raises(ForbiddenError):
            await kube.get(
                SECRET,
                listener_config_secret_name(world.listener.service_account),
                world.controller_namespace,
            )
        assert not await access_allowed(kube, "get", SECRET, namespace=world.namespace)


async def test_listener_cannot_create_pods(world: ListenerWorld, kube_client: KubeClient) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "escape"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    async with await world.listener.client() as kube:
        for namespace in (world.namespace, world.controller_namespace):
            with pytest.raises(ForbiddenError):
                await kube.create(pod, namespace=namespace)
            assert (await kube_client.list(POD, namespace=namespace)).items == []


async def test_listener_cannot_widen_or_delete(
    world: ListenerWorld, kube_client: KubeClient
) -> None:
    """Only ``patch``: no read, delete or create of its sets, no edit of its own Role."""
    async with await world.listener.client() as kube:
        name = world.own_sets[0]
        with pytest.raises(ForbiddenError):
            await kube.delete(EPHEMERAL_RUNNER_SET, name, namespace=world.namespace)
        with pytest.raises(ForbiddenError):
            await kube.get(EPHEMERAL_RUNNER_SET, name, world.namespace)
        with pytest.raises(ForbiddenError):
            await kube.delete(EPHEMERAL_RUNNER, world.runner, namespace=world.namespace)
        role = next(o for o in world.listener.objects if o["kind"] == "Role")
        widened = {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
        with pytest.raises(ForbiddenError):
            await kube.patch_merge(
                "Role", role["metadata"]["name"], widened, namespace=world.namespace
            )
        assert await access_allowed(
            kube, "patch", EPHEMERAL_RUNNER_SET, namespace=world.namespace, name=name
        )
    assert (await kube_client.get(EPHEMERAL_RUNNER_SET, name, world.namespace))["metadata"]["name"]
    stored = await kube_client.get("Role", role["metadata"]["name"], world.namespace)
    assert stored["rules"] == role["rules"]
