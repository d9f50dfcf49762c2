"""Faults only a real node gives, beyond the three of tests/scenario/test_helm_on_node.py
(docs/node.md, "Faults"; issue #30 item 5): containerd restarted, and runner pods evicted by a
node drain, each with jobs flowing, 0 lost and 0 run twice; then the runner slots of ADR 0100
on real containers (issue #33 item 1): a runner process that keeps running after its job, and
a runner container the kernel kills for memory in the middle of its job.

A node of this module's own with arcflow installed by helm as in the scenario
(tests/fixtures/helm_node.py). Root only, like every node test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.constants import LABEL_EPHEMERAL_RUNNER
from arcflow.devstack.identities import UMBRELLA_CHART
from arcflow.devstack.node import Node
from arcflow.devstack.node.release import (
    NAMESPACE,
    RELEASE,
    SERVICES,
    pods,
    runner_template,
    user_values,
)
from tests.fixtures.helm_node import (
    CHARTS,
    RUNNERS,
    VARIANTS,
    all_ready,
    diagnosis,
    enqueue_everywhere,
    get,
    helm,
    install_runner_set,
    jobs_done,
    scale_set_name,
    sim,
)
from tests.polling import eventually

pytestmark = pytest.mark.chaos

JOBS_WITHIN = 300


async def _flowing(node: Node, sim_url: str) -> None:
    """The services Ready and a live session per variant (the set is up)."""
    await all_ready(node, SERVICES, within=180)

    async def sessions() -> bool:
        scale_sets = sim(f"{sim_url}/_sim/snapshot").get("scaleSets") or []
        open_ = sorted(s["name"] for s in scale_sets if s.get("session"))
        assert open_ == sorted(map(scale_set_name, VARIANTS)), f"sessions open: {open_}"
        return True

    try:
        await eventually(sessions, within=180, interval=1, what="sessions open")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(node)}") from None


async def _busy_runner_pods(node: Node, sim_url: str, job_ids: list[str]) -> list[str]:
    """The runner pods while some of the jobs run on them."""

    async def busy() -> list[str]:
        jobs = sim(f"{sim_url}/_sim/jobs")["jobs"]
        running = [j for j in jobs if j["jobId"] in job_ids and j["state"] == "running"]
        assert running, "no job running yet"
        names = [
            p["metadata"]["name"]
            for p in pods(node, RUNNERS)
            if LABEL_EPHEMERAL_RUNNER in p["metadata"].get("labels", {})
        ]
        assert names, "no runner pod"
        return names

    return list(await eventually(busy, within=JOBS_WITHIN, interval=0.5, what="jobs running"))


async def test_a_containerd_restart_keeps_jobs_flowing(
    helm_node: Node, helm_simulator: str, helm_runner_set: str
) -> None:
    """containerd stopped and started mid-burst: the containers keep running under their
    shims, the kubelet reconnects, and new runner pods start once it is back."""
    await _flowing(helm_node, helm_simulator)
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=3.0)
    await _busy_runner_pods(helm_node, helm_simulator, job_ids)
    helm_node.restart("containerd")
    job_ids += enqueue_everywhere(helm_simulator, per_variant=1)
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)


def _kubectl(node: Node, *args: str) -> str:
    kubectl = Path(sys.executable).parent / "kubectl"
    command = [str(kubectl), "--kubeconfig", str(node.control_plane.kubeconfig), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


async def test_a_drain_evicting_runner_pods_loses_no_job(
    helm_node: Node, helm_simulator: str, helm_runner_set: str
) -> None:
    """``kubectl drain`` of the runner pods while they run jobs, then ``uncordon``: each evicted
    runner (SIGTERM, the pod's grace period) finishes and reports its job; a runner still
    waiting for one leaves, and the jobs not yet taken run on runners started after."""
    await _flowing(helm_node, helm_simulator)
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=3.0)
    busy = await _busy_runner_pods(helm_node, helm_simulator, job_ids)
    try:
        _kubectl(helm_node, "drain", helm_node.name, f"--pod-selector={LABEL_EPHEMERAL_RUNNER}",
                 "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s")  # fmt: skip
        left = {p["metadata"]["name"] for p in pods(helm_node, RUNNERS)}
        assert not left & set(busy), f"not evicted: {left & set(busy)}"
        job_ids += enqueue_everywhere(helm_simulator, per_variant=1)
    finally:
        _kubectl(helm_node, "uncordon", helm_node.name)
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)


# --- runner slots on real containers (ADR 0100), last: they shorten the reconciler's grace ----

SLOTS = "arc-slots"  # the second runner-set release, its namespace and its scale sets' prefix
#: How long a runner may run after GitHub completed its job (the chart's knob, set short here).
GRACE_SECONDS = 5


def _faulty(image: str, fault: str) -> dict[str, Any]:
    """The runner image with one of its test-only faults (``ARCFLOW_RUNNER_FAULT``)."""
    template = runner_template(image)
    template["spec"]["containers"][0]["env"] = [{"name": "ARCFLOW_RUNNER_FAULT", "value": fault}]
    return template


@pytest.fixture(scope="module")
def slot_runner_set(
    helm_node: Node,
    helm_release: str,
    helm_images: dict[str, str],
    helm_simulator: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """The reconciler's ``jobCompletedGraceSeconds`` set to a few seconds by ``helm upgrade``
    (a user's knob), and a runner set with two one-runner variants whose runners misbehave:
    ``hang`` keeps running after its job, ``oom`` allocates memory during its job until the
    container's 64Mi limit kills it."""
    folder = tmp_path_factory.mktemp("slots")
    values = user_values(helm_images)
    values["reconciler"]["jobCompletedGraceSeconds"] = GRACE_SECONDS
    (folder / "arcflow.yaml").write_text(yaml.safe_dump(values))
    chart = CHARTS.parents[1] / UMBRELLA_CHART
    helm(helm_node, "upgrade", RELEASE, str(chart), "-n", NAMESPACE, "-f",
         str(folder / "arcflow.yaml"))  # fmt: skip
    return install_runner_set(helm_node, helm_simulator, SLOTS, folder,
                              lambda url, token: _slot_values(helm_images, url, token))  # fmt: skip


def _slot_values(images: dict[str, str], config_url: str, token: str) -> dict[str, Any]:
    return {
        "githubConfigUrl": config_url,
        "githubConfigSecret": {"github_token": token},
        "minRunners": 0,
        "maxRunners": 1,
        "template": runner_template(images["runner"]),
        "runnerVariants": [
            {"name": "hang", "template": _faulty(images["runner"], "hang-after-job")},
            {"name": "oom", "template": _faulty(images["runner"], "oom-during-job")},
        ],
    }


def _enqueue(sim_url: str, variant: str, count: int, duration: float) -> list[str]:
    body = {"labels": [f"{SLOTS}-{variant}"], "count": count, "duration": duration}
    return list(sim(f"{sim_url}/_sim/jobs", "POST", body)["job_ids"])


def _events(node: Node, reason: str) -> list[dict[str, Any]]:
    found = get(node, f"/api/v1/namespaces/{SLOTS}/events").get("items", [])
    return [e for e in found if e.get("reason") == reason]


def _runner_pods(node: Node, variant: str) -> list[dict[str, Any]]:
    return [
        p
        for p in pods(node, SLOTS)
        if LABEL_EPHEMERAL_RUNNER in p["metadata"].get("labels", {})
        and p["metadata"]["name"].startswith(f"{SLOTS}-{variant}-")
    ]


async def _sessions(node: Node, sim_url: str) -> None:
    await all_ready(node, SERVICES, within=180)

    async def open_() -> bool:
        scale_sets = sim(f"{sim_url}/_sim/snapshot").get("scaleSets") or []
        names = sorted(s["name"] for s in scale_sets if s.get("session"))
        assert {f"{SLOTS}-hang", f"{SLOTS}-oom"} <= set(names), f"sessions open: {names}"
        return True

    try:
        await eventually(open_, within=180, interval=1, what="the slot variants' sessions")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(node, (NAMESPACE, SLOTS))}") from None


async def test_a_runner_alive_after_its_job_gives_its_slot_back(
    helm_node: Node, helm_simulator: str, slot_runner_set: str
) -> None:
    """Upstream #4603 on a real container: the runner process reports its job complete and
    keeps running. With one runner allowed, the second job still gets a runner of its own at
    once (a runner whose job completed serves no other, ADR 0110), and each hanging runner is
    stopped and its runner removed a few seconds (the grace) after its job completed."""
    await _sessions(helm_node, helm_simulator)
    job_ids = _enqueue(helm_simulator, "hang", 2, 1.0)

    async def both_done_and_no_runner_left() -> bool:
        jobs = [j for j in sim(f"{helm_simulator}/_sim/jobs")["jobs"] if j["jobId"] in job_ids]
        states = sorted(j["state"] for j in jobs)
        assert states == ["completed", "completed"], f"job states {states}"
        left = [p["metadata"]["name"] for p in _runner_pods(helm_node, "hang")]
        assert not left, f"runner pods still there: {left}"
        return True

    try:
        await eventually(both_done_and_no_runner_left, within=JOBS_WITHIN, interval=1,
                         what="both jobs completed and the hanging runners stopped")  # fmt: skip
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(helm_node, (NAMESPACE, SLOTS))}") from None
    jobs = [j for j in sim(f"{helm_simulator}/_sim/jobs")["jobs"] if j["jobId"] in job_ids]
    assert {(j["result"], j["attempt"]) for j in jobs} == {("succeeded", 1)}, jobs
    assert len({j["runnerName"] for j in jobs}) == 2, "each job on a runner of its own"
    reclaimed = _events(helm_node, "RunnerAliveAfterJob")
    named = {e["involvedObject"]["name"] for e in reclaimed}
    assert {j["runnerName"] for j in jobs} <= named, (named, jobs)


async def test_a_runner_killed_for_memory_mid_job_is_stopped_and_its_slot_comes_back(
    helm_node: Node, helm_simulator: str, slot_runner_set: str
) -> None:
    """Upstream #4155 on a real container: the kernel kills the runner for memory while it
    holds its job. The runner is said killed (a Warning Event naming it), its pod is stopped at
    once, and when GitHub fails the job of the dead runner (here the simulator's control API
    plays GitHub's timeout) the slot comes back: the variant's next job gets a runner pod."""
    await _sessions(helm_node, helm_simulator)
    [first] = _enqueue(helm_simulator, "oom", 1, 60.0)

    async def killed() -> list[dict[str, Any]]:
        found = _events(helm_node, "RunnerOOMKilled")
        assert found, "no RunnerOOMKilled Event yet"
        return found

    try:
        events = await eventually(killed, within=JOBS_WITHIN, interval=1, what="an OOM kill")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(helm_node, (NAMESPACE, SLOTS))}") from None
    runner = events[0]["involvedObject"]["name"]
    job = sim(f"{helm_simulator}/_sim/jobs/{first}")
    assert (job["state"], job["runnerName"]) == ("running", runner), job

    async def pod_stopped() -> bool:
        left = [p["metadata"]["name"] for p in _runner_pods(helm_node, "oom")]
        assert runner not in left, f"the killed runner's pod is still there: {left}"
        return True

    await eventually(pod_stopped, within=60, interval=1, what="the killed runner's pod stopped")
    sim(f"{helm_simulator}/_sim/jobs/{first}/complete", "POST", {"result": "failed"})
    [second] = _enqueue(helm_simulator, "oom", 1, 60.0)

    async def next_runner_took_it() -> str:
        job = sim(f"{helm_simulator}/_sim/jobs/{second}")
        assert job["state"] == "running", job
        assert job["runnerName"], job
        return str(job["runnerName"])

    try:
        taker = await eventually(next_runner_took_it, within=JOBS_WITHIN, interval=1,
                                 what="the next job on a new runner")  # fmt: skip
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(helm_node, (NAMESPACE, SLOTS))}") from None
    assert taker != runner
    sim(f"{helm_simulator}/_sim/jobs/{second}/complete", "POST", {"result": "failed"})
