"""Watcher, registrar and reconciler, each logged in as its own restricted NATS user, take an
ARS from apply to a registered runner: proof that the generated permission lists are complete.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import KubeClient
from arcflow.common.service.inprocess import running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.reconciler.settings import ReconcilerSettings
from tests.fast_services import control_plane
from tests.manifests import pat_secret
from tests.polling import eventually

from .conftest import SecuredNats

pytestmark = pytest.mark.integration

SECRET_NAME = "github-creds"


def _template(image: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "runner", "image": image}]}}


@pytest.fixture
async def restricted_stack(
    secured: SecuredNats,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
) -> AsyncIterator[None]:
    runs = control_plane(
        namespaces=[kube_namespace, controller_namespace],
        nats_for=secured.settings,
        errors_for=secured.error_hook,
        reconciler_settings=ReconcilerSettings(
            controller_namespace=controller_namespace,
            listener_image="ghcr.io/arcflow/listener:test",
            workers=2,
            retry_base_seconds=0.05,
            retry_cap_seconds=0.5,
            resync_interval_seconds=3600,
            fetch_timeout_seconds=0.2,
            rpc_timeout_seconds=2,
            pending_status_delay_seconds=0,  # runnerId in the status at once (ADR 0032)
        ),
    )
    async with running(*runs, kube=kube_client):
        yield


async def test_ars_apply_with_least_privilege_users(
    restricted_stack: None,
    secured: SecuredNats,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
    actions_sim: ActionsSimulator,
) -> None:
    kube, ns = kube_client, kube_namespace
    token = actions_sim.add_pat()
    await kube.create(pat_secret(SECRET_NAME, ns, token))
    await kube.create(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "perm", "namespace": ns},
            "spec": {
                "githubConfigUrl": actions_sim.config_url("my-org"),
                "githubConfigSecret": SECRET_NAME,
                "template": _template("runner:latest"),
                "runnerVariants": [{"name": "cpu", "template": _template("runner:cpu")}],
            },
        }
    )

    async def converged() -> bool:
        ars = await kube.get("AutoscalingRunnerSet", "perm", ns)
        sets = (await kube.list("EphemeralRunnerSet", namespace=ns)).items
        listeners = (await kube.list("AutoscalingListener", namespace=controller_namespace)).items
        annotations = ars["metadata"].get("annotations") or {}
        return (
            "actions.github.com/runner-scale-set-ids" in annotations
            and len(sets) == 1
            and len(listeners) == 1
        )

    await eventually(converged, within=15)
    # the runner path: the reconciler asks the registrar for a JIT config over the RPC
    await kube.patch_merge(
        "EphemeralRunnerSet", "perm-cpu", {"spec": {"replicas": 1, "patchID": 0}}, namespace=ns
    )

    async def registered() -> bool:
        runners = (await kube.list("EphemeralRunner", namespace=ns)).items
        return len(runners) == 1 and bool((runners[0].get("status") or {}).get("runnerId"))

    await eventually(registered, within=15)
    violations = {s: secured.violations(s) for s in ("watcher", "registrar", "reconciler")}
    assert violations == {"watcher": [], "registrar": [], "reconciler": []}
