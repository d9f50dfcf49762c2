"""Every slot comes back (ADR 0100), on the real API server with the real watcher, registrar
and Actions simulator.

No kubelet runs here: the test writes each runner pod's status as the kubelet would (a runner
container running, or terminated ``OOMKilled`` while a sidecar keeps the pod ``Running``), and
plays the runner with the JIT config the reconciler stored (the simulator hands it a job). The
``arcflow.io/job-completed-at`` annotation is written with the listener's own patch function,
as its worker writes it on a ``JobCompleted`` (services/listener's tests cover that the worker
does). How the pod got into that state does not matter to the reconciler; the real node's
tests make it happen for real.
"""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.events import JobInfo
from arcflow.common.kube import KubeClient, NotFoundError
from arcflow.common.nats import NatsSettings
from arcflow.common.service.inprocess import running
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.nats_server import NatsServer
from arcflow.listener.scaler import runner_completed_patch
from tests.fast_services import control_plane
from tests.manifests import pat_secret
from tests.polling import eventually

from .harness import metric_total, reconciler_test_settings, removal_calls, simulator_requests

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SECRET_NAME = "github-creds"
ARS = "slots"
RECLAIMED = "arcflow_reconciler_slots_reclaimed"


def _template() -> dict[str, Any]:
    """A runner and a sidecar (as dind): the pod stays Running when the runner ends."""
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "runner", "image": "runner:latest", "command": ["/home/runner/run.sh"]},
                {"name": "dind", "image": "docker:dind"},
            ],
        }
    }


@pytest.fixture
async def parts(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    controller_namespace: str,
    actions_sim: ActionsSimulator,
) -> AsyncIterator[dict[str, Any]]:
    url = private_nats_server.url
    reader = InMemoryMetricReader()
    runs = control_plane(
        namespaces=[kube_namespace, controller_namespace],
        nats_for=lambda _service: NatsSettings(url=url),
        reconciler_settings=reconciler_test_settings(
            controller_namespace=controller_namespace,
            job_completed_grace_seconds=1.0,
            # The orphan scan within the test's time (its removal path is counted too).
            orphan_scan_seconds=1.0,
            orphan_grace_seconds=1.0,
        ),
        reconciler_overrides={"context": {"job_running_recheck": 0.3}},
        reconciler_meter=MeterProvider(metric_readers=[reader]).get_meter("test"),
    )
    async with running(*runs, kube=kube_client):
        yield {"sim": actions_sim, "kube": kube_client, "ns": kube_namespace, "reader": reader}


def _ars(
    name: str, ns: str, sim: ActionsSimulator, variants: list[str] | None = None
) -> dict[str, Any]:
    """An ARS on the simulator's organization with the runner-and-sidecar template."""
    spec: dict[str, Any] = {
        "githubConfigUrl": sim.config_url("my-org"),
        "githubConfigSecret": SECRET_NAME,
        "template": _template(),
    }
    if variants:
        spec["runnerVariants"] = [{"name": v} for v in variants]
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _kubelet_status(runner: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    """A pod status as the kubelet writes it: scheduled, the sidecar running."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = "True" if "running" in runner else "False"
    return {
        "phase": phase,
        "startTime": now,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": ready, "lastTransitionTime": now},
        ],
        "containerStatuses": [
            {
                "name": "runner",
                "ready": "running" in runner,
                "restartCount": 0,
                "state": runner,
                "image": "runner:latest",
                "imageID": "",
            },
            {
                "name": "dind",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "image": "docker:dind",
                "imageID": "",
            },
        ],
    }


RUNNING = {"running": {"startedAt": "2026-12-02T00:00:00Z"}}
EXITED_0 = {
    "terminated": {
        "exitCode": 0,
        "reason": "Completed",
        "finishedAt": "2026-12-02T00:00:01Z",
        "startedAt": "2026-12-02T00:00:00Z",
    }
}
OOM = {
    "terminated": {
        "exitCode": 137,
        "reason": "OOMKilled",
        "finishedAt": "2026-12-02T00:00:01Z",
        "startedAt": "2026-12-02T00:00:00Z",
    }
}


async def _events(kube: KubeClient, ns: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in (await kube.list("Event", namespace=ns)).items if e.get("reason") == reason]


async def test_runners_that_can_do_no_more_work_give_their_slot_back(
    parts: dict[str, Any],
) -> None:
    sim: ActionsSimulator = parts["sim"]
    kube: KubeClient = parts["kube"]
    ns: str = parts["ns"]
    reader: InMemoryMetricReader = parts["reader"]
    await kube.create(pat_secret(SECRET_NAME, ns, sim.add_pat()))
    await kube.create(_ars(ARS, ns, sim))

    async def runner_set() -> str | None:
        found = (await kube.list("EphemeralRunnerSet", namespace=ns)).items
        return str(found[0]["metadata"]["name"]) if found else None

    ers = await eventually(runner_set, within=20)
    # A listener's scale request for four runners (patchID 1: served once, as in production).
    await kube.patch_merge(
        "EphemeralRunnerSet", ers, {"spec": {"replicas": 4, "patchID": 1}}, namespace=ns
    )

    async def four() -> list[dict[str, Any]] | None:
        runners = (await kube.list("EphemeralRunner", namespace=ns)).items
        pods = {p["metadata"]["name"] for p in (await kube.list("Pod", namespace=ns)).items}
        ok = len(runners) == 4 and all(
            (r.get("status") or {}).get("runnerId") and r["metadata"]["name"] in pods
            for r in runners
        )
        return sorted(runners, key=lambda r: r["metadata"]["name"]) if ok else None

    alive, idle_oom, busy_oom, done = await eventually(four, within=30)
    names = {
        r["metadata"]["name"]: r["status"]["runnerId"] for r in (alive, idle_oom, busy_oom, done)
    }

    async def jit(name: str) -> str:
        secret = await kube.get("Secret", name, ns)
        return base64.b64decode(secret["data"]["jitToken"]).decode()

    async def start_job(name: str) -> str:
        """GitHub hands the runner a job; the listener's JobStarted writes it on the runner."""
        job_id = sim.enqueue_job([ARS])
        sim.connect_runner(await jit(name))
        job = await sim.wait_for_job_state(job_id, "running")
        assert job["runnerName"] == name, job
        await kube.patch_status("EphemeralRunner", name, {"jobId": job_id}, namespace=ns)
        return job_id

    # 1. A runner alive after its job: GitHub completes it, the pod still runs.
    a = alive["metadata"]["name"]
    await kube.patch_status("Pod", a, _kubelet_status(RUNNING), namespace=ns)
    job_a = await start_job(a)
    sim.complete_job(job_a)
    completed = JobInfo(message_type="JobCompleted", runner_name=a)
    patch = runner_completed_patch(completed, datetime.now(UTC))
    await kube.patch_merge("EphemeralRunner", a, patch, namespace=ns)

    # 2. A runner killed for memory before it took a job: the sidecar keeps its pod Running.
    b = idle_oom["metadata"]["name"]
    first_pod_b = (await kube.get("Pod", b, ns))["metadata"]["uid"]
    await kube.patch_status("Pod", b, _kubelet_status(OOM), namespace=ns)

    # 3. A runner killed for memory during its job (GitHub still counts it busy).
    c = busy_oom["metadata"]["name"]
    await kube.patch_status("Pod", c, _kubelet_status(RUNNING), namespace=ns)
    job_c = await start_job(c)
    await kube.patch_status("Pod", c, _kubelet_status(OOM), namespace=ns)

    # 4. A runner that finished its job and exited 0 (before its listener heard of the end).
    d = done["metadata"]["name"]
    await kube.patch_status("Pod", d, _kubelet_status(RUNNING), namespace=ns)
    sim.complete_job(await start_job(d))
    await kube.patch_status("Pod", d, _kubelet_status(EXITED_0), namespace=ns)

    async def reclaimed() -> bool:
        runners = {
            r["metadata"]["name"]: r
            for r in (await kube.list("EphemeralRunner", namespace=ns)).items
        }
        pods = {p["metadata"]["name"]: p for p in (await kube.list("Pod", namespace=ns)).items}
        new_pod_b = b in pods and pods[b]["metadata"]["uid"] != first_pod_b
        c_released = c not in pods or bool(pods[c]["metadata"].get("deletionTimestamp"))
        a_gone = a not in runners and a not in pods
        return a_gone and d not in runners and new_pod_b and c_released

    await eventually(reclaimed, within=30)
    # Said on each runner, naming it and why.
    (said_a,) = await _events(kube, ns, "RunnerAliveAfterJob")
    assert said_a["involvedObject"]["name"] == a
    assert a in said_a["message"]
    oom = {
        e["involvedObject"]["name"]: e["message"]
        for e in await _events(kube, ns, "RunnerOOMKilled")
    }
    assert set(oom) == {b, c}
    assert "a new pod is made" in oom[b]
    assert "ends Failed" in oom[c]
    # Runners whose job completed left GitHub with it: no removal call was made for them (as
    # upstream 0.15 for an exit 0, issue 33 item 2; ADR 0100 for a completion GitHub reported).
    assert await removal_calls(sim, names[a]) == 0
    assert await removal_calls(sim, names[d]) == 0
    # b keeps its registration and a new pod: a job queued now runs on it (not lost).
    runner_b = await kube.get("EphemeralRunner", b, ns)
    assert runner_b["status"]["reason"] == "OOMKilled"
    assert first_pod_b in runner_b["status"]["failures"]
    job_b = await start_job(b)
    assert sim.job(job_b)["state"] == "running"
    # c ended Failed; its runner leaves the cluster once GitHub lets it go (its job ends).
    sim.complete_job(job_c, "failed")

    async def c_gone() -> bool:
        names_now = {
            r["metadata"]["name"] for r in (await kube.list("EphemeralRunner", namespace=ns)).items
        }
        return c not in names_now

    await eventually(c_gone, within=20)
    assert metric_total(reader, RECLAIMED, reason="alive_after_job") == 1
    assert metric_total(reader, RECLAIMED, reason="oom_killed") == 2
    await _every_removal_path_calls_once(sim, kube, ns, ers, {b})


async def _runners(kube: KubeClient, ns: str) -> dict[str, dict[str, Any]]:
    return {
        r["metadata"]["name"]: r for r in (await kube.list("EphemeralRunner", namespace=ns)).items
    }


async def _every_removal_path_calls_once(
    sim: ActionsSimulator, kube: KubeClient, ns: str, ers: str, busy: set[str]
) -> None:
    """Each path that removes a runner from GitHub makes one call for it over its life, off
    the reconcile pass (ADR 0108), counted on the simulator's request log."""
    # The listener's next scale request: one idle runner beside the busy one.
    await kube.patch_merge(
        "EphemeralRunnerSet", ers, {"spec": {"replicas": 2, "patchID": 2}}, namespace=ns
    )

    async def registered_idle() -> dict[str, Any] | None:
        pods = {p["metadata"]["name"] for p in (await kube.list("Pod", namespace=ns)).items}
        for name, r in sorted((await _runners(kube, ns)).items()):
            if name not in busy and name in pods and (r.get("status") or {}).get("runnerId"):
                return r
        return None

    idle = await eventually(registered_idle, within=20, what="a registered idle runner")
    scale_set_id = int(idle["spec"]["runnerScaleSetId"])

    # A GitHub runner no EphemeralRunner stands for: the orphan scan removes it.
    ghost, _ = sim.engine.generate_jit_config(scale_set_id, {"name": "ghost"})

    # A stale registration of the name a runner asks its JIT config for: removed, then the
    # runner registers afresh.
    stale, _ = sim.engine.generate_jit_config(scale_set_id, {"name": "stale-name"})
    meta = idle["metadata"]
    await kube.create(
        {
            "apiVersion": idle["apiVersion"],
            "kind": "EphemeralRunner",
            "metadata": {
                "name": "stale-name",
                "namespace": ns,
                "labels": meta.get("labels") or {},
                "annotations": {
                    k: v
                    for k, v in (meta.get("annotations") or {}).items()
                    if not k.startswith("arcflow.io/")
                },
            },
            "spec": idle["spec"],
        }
    )

    # A runner whose pod the API server refuses as invalid (a limit below its request): marked
    # Failed/InvalidPod and removed from GitHub while it stays (its set may delete it later).
    bad = copy.deepcopy(idle["spec"])
    for container in bad["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    await kube.create(
        {
            "apiVersion": idle["apiVersion"],
            "kind": "EphemeralRunner",
            "metadata": {"name": "invalid-pod", "namespace": ns, "labels": meta.get("labels")},
            "spec": bad,
        }
    )

    async def invalid_marked() -> int | None:
        status = ((await _runners(kube, ns)).get("invalid-pod") or {}).get("status") or {}
        marked = status.get("reason") == "InvalidPod" and status.get("runnerId")
        return int(status["runnerId"]) if marked else None

    invalid_id = await eventually(invalid_marked, within=20, what="the invalid runner marked")

    async def removed_once() -> bool:
        fresh = ((await _runners(kube, ns)).get("stale-name") or {}).get("status") or {}
        seen = {
            "stale-name registered": bool(fresh.get("runnerId")),
            "ghost calls": await removal_calls(sim, ghost.id),
            "stale calls": await removal_calls(sim, stale.id),
            "invalid calls": await removal_calls(sim, invalid_id),
        }
        want = {"stale-name registered": True, "ghost calls": 1, "stale calls": 1}
        assert seen == {**want, "invalid calls": 1}, seen
        return True

    # The invalid runner, deregistered, may be deleted meanwhile (the orphan scan finds its
    # GitHub runner gone): its finalizer then makes no second call.
    await eventually(removed_once, within=30, what="each removed once")

    # A runner whose image is outdated (exit 7): marked Outdated, deleted with its set (last:
    # the ARS then replaces the set, which the orphan scan skips meanwhile).
    outdated = meta["name"]
    outdated_id = int(idle["status"]["runnerId"])
    await kube.patch_status(
        "Pod",
        outdated,
        _kubelet_status({"terminated": {"exitCode": 7, "reason": "Error"}}, phase="Failed"),
        namespace=ns,
    )

    async def outdated_gone() -> bool:
        return outdated not in await _runners(kube, ns)

    await eventually(outdated_gone, within=30, what="the outdated runner released")
    assert await removal_calls(sim, outdated_id) == 1
    fresh_id = int((await kube.get("EphemeralRunner", "stale-name", ns))["status"]["runnerId"])
    assert fresh_id != stale.id
    # Later scans and passes make no second call for any of them.
    for name in ("stale-name", "invalid-pod"):  # unless the replaced set took them already
        with contextlib.suppress(NotFoundError):
            await kube.delete("EphemeralRunner", name, namespace=ns)

    async def both_gone() -> bool:
        return not {"stale-name", "invalid-pod"} & set(await _runners(kube, ns))

    await eventually(both_gone, within=20, what="the re-registered and the invalid runner released")
    ids = (ghost.id, stale.id, outdated_id, fresh_id, invalid_id)
    assert [await removal_calls(sim, i) for i in ids] == [1, 1, 1, 1, 1]


async def test_the_orphan_scan_lists_github_once_per_ars(parts: dict[str, Any]) -> None:
    """ADR 0121: the scan asks for the runners of all an ARS's scale sets at once; one listing
    on GitHub answers them, and an orphan in any of them is still found and removed."""
    sim: ActionsSimulator = parts["sim"]
    kube: KubeClient = parts["kube"]
    ns: str = parts["ns"]
    reader: InMemoryMetricReader = parts["reader"]
    await kube.create(pat_secret(SECRET_NAME, ns, sim.add_pat()))
    await kube.create(_ars("shapes", ns, sim, variants=["a", "b", "c"]))

    async def scale_set_ids() -> list[int] | None:
        found = (await kube.list("EphemeralRunnerSet", namespace=ns)).items
        ids = sorted(
            int(s["spec"].get("ephemeralRunnerSpec", {}).get("runnerScaleSetId") or 0)
            for s in found
        )
        return ids if len(ids) == 3 and all(ids) else None

    ids = await eventually(scale_set_ids, within=30, what="three runner sets with scale set ids")
    # GitHub runners no EphemeralRunner stands for, in two of the three scale sets.
    ghosts = [sim.engine.generate_jit_config(i, {"name": f"ghost-{i}"})[0] for i in ids[1:]]

    async def ghosts_removed() -> bool:
        calls = {g.id: await removal_calls(sim, g.id) for g in ghosts}
        assert all(calls.values()), calls
        return True

    await eventually(ghosts_removed, within=30, what="both orphaned GitHub runners removed")

    scans = metric_total(reader, "arcflow_reconciler_orphan_scans")
    listings = await simulator_requests(sim, "*/agents", "GET")

    async def three_more_scans() -> int:
        now = metric_total(reader, "arcflow_reconciler_orphan_scans")
        assert now >= scans + 3, f"orphan scans: {now - scans} since the count started"
        return now

    done = await eventually(three_more_scans, within=30, what="three more orphan scans")
    listed = await simulator_requests(sim, "*/agents", "GET") - listings
    # One listing per scan for the one ARS (a scan under way at either end counts once more);
    # a listing per scale set would be three per scan.
    assert listed <= done - scans + 1, f"{listed} listings in {done - scans} scans"
    assert listed >= done - scans - 1, f"{listed} listings in {done - scans} scans"
