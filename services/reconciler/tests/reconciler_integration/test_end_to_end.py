"""End to end, event-driven, with the real parts: the Kubernetes emulator, a real
nats-server, the real watcher, the real registrar talking to the Actions simulator, and the
reconciler. Nothing is published by hand: every reconcile is caused by a watcher or
registrar event.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arcflow.common.kube import KubeClient
from arcflow.common.nats import NatsSettings
from arcflow.common.service.inprocess import running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer
from tests.fast_services import control_plane
from tests.manifests import pat_secret
from tests.polling import eventually

from .harness import reconciler_test_settings, removal_calls, runner_template

pytestmark = pytest.mark.integration

SECRET_NAME = "github-creds"


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
        reconciler_settings=reconciler_test_settings(controller_namespace=controller_namespace),
    )
    async with running(*runs, kube=kube_client) as runtimes:
        yield {
            "reconciler": runtimes["reconciler"].state,
            "sim": actions_sim,
            "kube": kube_client,
            "ns": kube_namespace,
            "controller_ns": controller_namespace,
        }


async def _list(kube: KubeClient, kind: str, namespace: str) -> list[dict[str, Any]]:
    return (await kube.list(kind, namespace=namespace)).items


async def test_apply_scale_delete_end_to_end(parts: dict[str, Any]) -> None:
    sim: ActionsSimulator = parts["sim"]
    kube: KubeClient = parts["kube"]
    ns: str = parts["ns"]
    token = sim.add_pat()
    await kube.create(pat_secret(SECRET_NAME, ns, token))
    await kube.create(
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "e2e", "namespace": ns},
            "spec": {
                "githubConfigUrl": sim.config_url("my-org"),
                "githubConfigSecret": SECRET_NAME,
                "template": runner_template("runner:latest"),
                "runnerVariants": [
                    {"name": "cpu", "template": runner_template("runner:cpu")},
                    {"name": "gpu", "template": runner_template("runner:gpu")},
                ],
            },
        }
    )

    # 1. scale sets in the simulator, ids on the ARS, two ERSs, one AL, a Role over both
    async def converged() -> dict[str, Any] | None:
        ars = await kube.get("AutoscalingRunnerSet", "e2e", ns)
        annotations = ars["metadata"].get("annotations") or {}
        sets = await _list(kube, "EphemeralRunnerSet", ns)
        listeners = await _list(kube, "AutoscalingListener", parts["controller_ns"])
        roles = await _list(kube, "Role", ns)
        if (
            "actions.github.com/runner-scale-set-ids" in annotations
            and len(sets) == 2
            and len(listeners) == 1
            and roles
            and (ars.get("status") or {}).get("phase") == "Running"
        ):
            return ars
        return None

    ars = await eventually(converged, within=15)
    in_sim = {s["name"]: s["id"] for s in sim.snapshot()["scaleSets"]}
    ids = json.loads(ars["metadata"]["annotations"]["actions.github.com/runner-scale-set-ids"])
    assert set(ids.values()) == set(in_sim.values())
    assert len(in_sim) == 2
    sets = {e["metadata"]["name"]: e for e in await _list(kube, "EphemeralRunnerSet", ns)}
    assert set(sets) == {"e2e-cpu", "e2e-gpu"}
    assert sets["e2e-cpu"]["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == ids["cpu"]
    role = (await _list(kube, "Role", ns))[0]
    assert role["rules"][0]["resourceNames"] == ["e2e-cpu", "e2e-gpu"]

    # 2. the listener's patch: replicas 5, patchID 0 -> 5 runners with JIT from the simulator
    await kube.patch_merge(
        "EphemeralRunnerSet", "e2e-cpu", {"spec": {"replicas": 5, "patchID": 0}}, namespace=ns
    )

    async def five() -> list[dict[str, Any]] | None:
        runners = await _list(kube, "EphemeralRunner", ns)
        pods = [p for p in await _list(kube, "Pod", ns) if p["metadata"]["name"].startswith("e2e")]
        registered = all((r.get("status") or {}).get("runnerId") for r in runners)
        return runners if len(runners) == 5 and registered and len(pods) == 5 else None

    runners = await eventually(five, within=15)
    sim_runners = {r["name"]: r for r in sim.snapshot()["runners"]}
    secrets = {s["metadata"]["name"]: s for s in await _list(kube, "Secret", ns)}
    for er in runners:
        name = er["metadata"]["name"]
        assert sim_runners[name]["id"] == er["status"]["runnerId"]
        jit = json.loads(base64.b64decode(base64.b64decode(secrets[name]["data"]["jitToken"])))
        runner_file = json.loads(base64.b64decode(jit[".runner"]))
        assert runner_file["agentName"] == name
        assert runner_file["scaleSetId"] == ids["cpu"]
        pod = await kube.get("Pod", name, ns)
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"]["name"] == name

    # 2b. patchID 0 asking for 2: three idle runners are removed from the service by the real
    # registrar (gone from the simulator), then their EphemeralRunners and pods deleted
    await kube.patch_merge(
        "EphemeralRunnerSet", "e2e-cpu", {"spec": {"replicas": 2, "patchID": 0}}, namespace=ns
    )

    async def two_left() -> tuple[set[str], set[str]] | None:
        left = {r["metadata"]["name"] for r in await _list(kube, "EphemeralRunner", ns)}
        in_service = {r["name"] for r in sim.snapshot()["runners"] if r["name"].startswith("e2e")}
        return (left, in_service) if len(left) == 2 and in_service == left else None

    left, _in_service = await eventually(two_left, within=20)
    removed = {er["metadata"]["name"]: er["status"]["runnerId"] for er in runners}
    gone = {name: rid for name, rid in removed.items() if name not in left}
    assert len(gone) == 3
    sim_ids = {r["id"] for r in sim.snapshot()["runners"]}
    assert not set(gone.values()) & sim_ids, "a deleted EphemeralRunner is still registered"
    # Each removed once (ADR 0101): the simulator's own request log, over its HTTP control API.
    assert {rid: await removal_calls(sim, rid) for rid in gone.values()} == dict.fromkeys(
        gone.values(), 1
    )

    # 3. delete the ARS: every child gone, scale sets deleted in the simulator, ARS gone. The
    # runner part of the reconciler's cache lags a second (what a busy burst does by chance):
    # the watch echo of each runner's delete re-queues it after its release, and no runner is
    # removed a second time for it.
    for informer in parts["reconciler"].cache.informers_of("EphemeralRunner"):
        informer.delay_seconds = 1.0
    await kube.delete("AutoscalingRunnerSet", "e2e", namespace=ns)

    async def all_gone() -> bool:
        leftovers = [
            *await _list(kube, "AutoscalingRunnerSet", ns),
            *await _list(kube, "EphemeralRunnerSet", ns),
            *await _list(kube, "EphemeralRunner", ns),
            *await _list(kube, "AutoscalingListener", parts["controller_ns"]),
            *await _list(kube, "Pod", parts["controller_ns"]),
            *await _list(kube, "Role", ns),
            *await _list(kube, "RoleBinding", ns),
            *[p for p in await _list(kube, "Pod", ns) if p["metadata"]["name"].startswith("e2e")],
        ]
        return not leftovers and not sim.snapshot()["scaleSets"]

    await eventually(all_gone, within=15)
    assert not [r for r in sim.snapshot()["runners"] if r["name"].startswith("e2e")]
    kept = {rid for name, rid in removed.items() if name in left}
    assert {rid: await removal_calls(sim, rid) for rid in kept} == dict.fromkeys(kept, 1)
