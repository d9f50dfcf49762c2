"""Faults only a real node gives, beyond the three of tests/scenario/test_helm_on_node.py
(docs/node.md, "Faults"; issue #30 item 5): containerd restarted, and runner pods evicted by a
node drain, each with jobs flowing, 0 lost and 0 run twice.

A node of this module's own with arcflow installed by helm as in the scenario
(tests/fixtures/helm_node.py). Root only, like every node test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arcflow.common.constants import LABEL_EPHEMERAL_RUNNER
from arcflow.devstack.node import Node
from tests.fixtures.helm_node import (
    RUNNERS,
    SERVICES,
    VARIANTS,
    all_ready,
    diagnosis,
    enqueue_everywhere,
    jobs_done,
    pods,
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
