"""A lasting GitHub outage on one variant does not starve its siblings (reliability finding 2,
ADR 0044). Real watcher, registrar (with the production retry schedule: 1, 2, 4, 8 s) and
reconciler (production RPC deadline, 10 s); the Actions simulator answers 503 to every JIT
config request of the ``gpu`` scale set. The sibling variants' runners still get their JIT
configs within a bound, the failing variant says why in a Warning Event on its
EphemeralRunnerSet, and its runners get their configs soon after the outage ends."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.actions import ActionsClient
from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.retry import RetryPolicy
from arcflow.common.kube import KubeClient
from arcflow.common.nats import NatsSettings
from arcflow.common.service.inprocess import running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.registrar.credentials import Credentials
from tests.fast_services import control_plane
from tests.manifests import pat_secret
from tests.polling import eventually

from .harness import reconciler_test_settings, runner_template

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SECRET_NAME = "github-creds"
VARIANTS = ("small", "large", "gpu")
GPU_RUNNERS, SIBLING_RUNNERS = 8, 3
#: Before ADR 0044 the siblings' runners waited behind two rounds of gpu requests, each
#: holding a reconciler worker for the full 10 s RPC deadline: over 20 s.
SIBLINGS_WITHIN = 15.0


def production_retries(
    config_url: str, credentials: Credentials, connection: ServerConnection | None = None
) -> ActionsClient:
    return ActionsClient(config_url, credentials, retry=RetryPolicy(), connection=connection)


@pytest.fixture
async def parts(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
    actions_sim: ActionsSimulator,
) -> AsyncIterator[dict[str, Any]]:
    url = private_nats_server.url
    runs = control_plane(
        namespaces=[kube_namespace, controller_namespace],
        nats_for=lambda _service: NatsSettings(url=url),
        reconciler_settings=reconciler_test_settings(
            rpc_timeout_seconds=10.0, controller_namespace=controller_namespace
        ),
        client_factory=production_retries,
    )
    async with running(*runs, kube=kube_client):
        yield {
            "sim": actions_sim,
            "kube": kube_client,
            "ns": kube_namespace,
            "controller_ns": controller_namespace,
        }


async def _registered(kube: KubeClient, ns: str, ers: str) -> int:
    """Runners of ``ers`` whose JIT Secret exists (the registrar answered for them)."""
    secrets = {s["metadata"]["name"] for s in (await kube.list("Secret", namespace=ns)).items}
    runners = (await kube.list("EphemeralRunner", namespace=ns)).items
    return sum(
        1
        for r in runners
        if r["metadata"]["name"] in secrets
        and any(o.get("name") == ers for o in r["metadata"].get("ownerReferences") or [])
    )


async def test_an_outage_on_one_variant_does_not_starve_its_siblings(
    parts: dict[str, Any],
) -> None:
    sim: ActionsSimulator = parts["sim"]
    kube: KubeClient = parts["kube"]
    ns: str = parts["ns"]
    token = sim.add_pat()
    await kube.create(pat_secret(SECRET_NAME, ns, token))
    await kube.create(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "out", "namespace": ns},
            "spec": {
                "githubConfigUrl": sim.config_url("my-org"),
                "githubConfigSecret": SECRET_NAME,
                "template": runner_template("runner:latest"),
                "runnerVariants": [
                    {"name": v, "template": runner_template(f"runner:{v}")} for v in VARIANTS
                ],
            },
        }
    )

    async def three_sets() -> bool:
        sets = (await kube.list("EphemeralRunnerSet", namespace=ns)).items
        return len(sets) == 3 and all(s["spec"].get("ephemeralRunnerSpec") for s in sets)

    await eventually(three_sets, within=20)
    (gpu_id,) = [s["id"] for s in sim.snapshot()["scaleSets"] if s["name"] == "out-gpu"]
    outage = sim.inject_status(
        f"*/runnerscalesets/{gpu_id}/generatejitconfig", 503, method="POST", times=10**6
    )

    # gpu first, so its runners are ahead of the siblings' in every queue.
    await kube.patch_merge(
        "EphemeralRunnerSet",
        "out-gpu",
        {"spec": {"replicas": GPU_RUNNERS, "patchID": 1}},
        namespace=ns,
    )

    async def gpu_asking() -> bool:
        return outage.hits >= 1

    await eventually(gpu_asking, within=15)
    scaled = time.monotonic()
    for variant in ("small", "large"):
        await kube.patch_merge(
            "EphemeralRunnerSet",
            f"out-{variant}",
            {"spec": {"replicas": SIBLING_RUNNERS, "patchID": 1}},
            namespace=ns,
        )

    async def siblings_registered() -> bool:
        counts = [await _registered(kube, ns, f"out-{v}") for v in ("small", "large")]
        return counts == [SIBLING_RUNNERS, SIBLING_RUNNERS]

    await eventually(siblings_registered, within=SIBLINGS_WITHIN * 3)
    siblings_after = time.monotonic() - scaled
    print(f"sibling runners registered {siblings_after:.1f}s after their scale-up")
    assert siblings_after <= SIBLINGS_WITHIN
    assert await _registered(kube, ns, "out-gpu") == 0

    # The failing variant says why, on its own EphemeralRunnerSet.
    async def warned() -> list[dict[str, Any]]:
        return [
            e
            for e in (await kube.list("Event", namespace=ns)).items
            if e.get("reason") == "RunnerRegistrationFailing"
        ]

    events = await eventually(warned, within=15)
    assert {e["involvedObject"]["name"] for e in events} == {"out-gpu"}
    assert all(e["type"] == "Warning" for e in events)
    assert "upstream_error" in events[0]["message"]
    assert f"scale set {gpu_id}" in events[0]["message"]
    # A few probes, not one retry chain per runner and attempt: GitHub is spared too.
    hits_in_outage = outage.hits

    # The outage ends: gpu's runners get their configs soon.
    sim.clear_faults()
    ended = time.monotonic()

    async def gpu_registered() -> bool:
        return await _registered(kube, ns, "out-gpu") == GPU_RUNNERS

    await eventually(gpu_registered, within=30)
    print(
        f"gpu runners registered {time.monotonic() - ended:.1f}s after the outage; "
        f"{hits_in_outage} JIT requests reached GitHub during it"
    )
