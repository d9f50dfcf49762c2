"""Upstream ARC still runs as a peer (ADR 0060): ``scripts/arc.sh`` builds (or reuses) upstream
actions-runner-controller v0.27.6's controller and listener from the Go module proxy; on a real
control plane of its own (upstream's CRDs replace arcflow's: the shared session server keeps
arcflow's), its controller runs as its chart's ServiceAccount, one ``gha-runner-scale-set``
release rendered from upstream's chart is applied, and one job goes through: upstream's
listener (run by the pod runner from its pod) scales the set, upstream's controller makes the
runner and its pod, the simulated runner runs the job, and everything is cleaned up. The
benchmark that uses the same peer is ``benchmarks/vs_arc.py`` (docs/benchmarks/vs-arc.md).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
)
from arcflow.devstack import upstream_arc
from arcflow.devstack.factory import StackFactory, StackParts
from arcflow.devstack.pod_spec import classify_pod
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.scenario]

NAMESPACE = "arc-peer"
#: A first build downloads the module and compiles both programs (minutes on 2 busy cores);
#: a cached one is reused by scripts/arc.sh.
BUILD_TIMEOUT = 1500.0


@pytest.fixture(scope="module")
def arc_build() -> upstream_arc.ArcBuild:
    if shutil.which("go") is None:
        pytest.fail("Go 1.26 is needed to build upstream ARC (scripts/install-tools.sh)")
    problem = upstream_arc.check_mount_namespaces()
    if problem:
        pytest.skip(f"upstream's listener cannot get its token here: {problem}")
    return upstream_arc.locate_arc(timeout=BUILD_TIMEOUT)


@pytest.mark.timeout(BUILD_TIMEOUT + 240)  # the fixture may build first
async def test_one_upstream_scale_set_runs_one_job(
    arc_build: upstream_arc.ArcBuild, tmp_path: Path
) -> None:
    async with StackFactory(
        kube="apiserver",
        audit=True,
        services=(),
        namespaces=[NAMESPACE],
        work_dir=tmp_path / "stack",
        job_duration=0.5,
    ) as parts:
        assert parts.control_plane is not None
        assert parts.simulator is not None
        assert parts.pod_runner is not None
        peer = upstream_arc.ArcPeer(arc_build, parts.control_plane, tmp_path / "arc")
        try:
            await asyncio.to_thread(peer.start, parts.pod_runner)
            assert peer.chart is not None
            docs = upstream_arc.render_scale_set_chart(
                arc_build,
                tmp_path / "release",
                release="peer",
                namespace=NAMESPACE,
                config_url=parts.simulator.config_url("example-org"),
                token=parts.simulator.add_pat(),
                controller_service_account=peer.chart.service_account,
                max_runners=2,
                min_runners=0,
            )
            assert sorted(d["kind"] for d in docs) == [
                "AutoscalingRunnerSet",
                "Role",
                "RoleBinding",
                "Secret",
                "ServiceAccount",
            ]
            await asyncio.to_thread(peer.apply, docs)

            async def session_open() -> bool:
                sets = parts.simulator.snapshot()["scaleSets"] if parts.simulator else []
                return any(s["name"] == "peer" and s.get("session") for s in sets)

            await eventually(
                session_open, within=90, interval=0.25, what="upstream's listener's session"
            )
            listeners = (await parts.kube.list(AUTOSCALING_LISTENER)).items
            assert len(listeners) == 1, "one AutoscalingListener for the one set"
            assert listeners[0]["metadata"]["namespace"] == peer.namespace
            job = parts.simulator.enqueue_job(["peer"], duration=0.5)

            async def completed() -> bool:
                assert parts.simulator is not None
                state = parts.simulator.engine.job(job).state.value
                assert state == "completed", f"job is {state}"
                return True

            try:
                await eventually(completed, within=120, interval=0.25, what="the job completed")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{await _world(parts, peer, tmp_path)}") from None
            runner_pods = [r for r in parts.pod_runner.records.values() if r.kind == "runner"]
            assert [r.job_id for r in runner_pods] == [job]

            # The runner reports the job done before its process exits: the exit comes after.
            async def exited() -> bool:
                assert parts.pod_runner is not None
                (pod,) = [r for r in parts.pod_runner.records.values() if r.kind == "runner"]
                assert pod.exit_code is not None, f"runner pod {pod.name} has not exited"
                assert pod.exit_code == 0, f"runner pod {pod.name} exited {pod.exit_code}"
                return True

            await eventually(exited, within=30, interval=0.25, what="the runner pod exited 0")

            async def cleaned_up() -> bool:
                runners = (await parts.kube.list(EPHEMERAL_RUNNER, namespace=NAMESPACE)).items
                pods = (await parts.kube.list(POD, namespace=NAMESPACE)).items
                left = [p["metadata"]["name"] for p in pods if classify_pod(p) == "runner"]
                assert not runners, f"{len(runners)} EphemeralRunners left"
                assert not left, f"runner pods left: {left}"
                return True

            try:
                await eventually(cleaned_up, within=60, interval=0.25, what="the runner cleaned up")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{await _world(parts, peer, tmp_path)}") from None
            # Upstream's controller ran as its chart's ServiceAccount: the audit log names it.
            log = parts.control_plane.audit_log.read_text()
            assert f'"username":"{peer.username}"' in log
            assert peer.controller is not None
            assert peer.controller.alive
        finally:
            await asyncio.to_thread(peer.stop)


async def _world(parts: StackParts, peer: upstream_arc.ArcPeer, tmp_path: Path) -> str:
    """What a stuck job's test shows: the sets, runners and pods, what the pod runner ran, and
    the tails of upstream's controller log and of the listener's output."""
    kube = parts.kube
    sets = (await kube.list(EPHEMERAL_RUNNER_SET, namespace=NAMESPACE)).items
    runners = (await kube.list(EPHEMERAL_RUNNER, namespace=NAMESPACE)).items
    pods = (await kube.list(POD)).items
    lines = [
        "EphemeralRunnerSets: "
        + str([(s["metadata"]["name"], s["spec"].get("replicas"), s.get("status")) for s in sets]),
        "EphemeralRunners: "
        + str([(r["metadata"]["name"], r.get("status", {}).get("phase")) for r in runners]),
        "pods: "
        + str(
            [
                (
                    p["metadata"]["namespace"],
                    p["metadata"]["name"],
                    p.get("status", {}).get("phase"),
                )
                for p in pods
            ]
        ),
    ]
    if parts.pod_runner is not None:
        lines.append(
            "pod runner: "
            + str(
                [
                    (r.kind, r.name, r.started_at is not None, r.exit_code, r.job_id)
                    for r in parts.pod_runner.records.values()
                ]
            )
        )
    if peer.controller is not None:
        lines.append("upstream controller log:\n" + peer.controller.tail(25))
    for log in sorted(tmp_path.rglob("listener.log")):
        text = log.read_text(errors="replace").splitlines()[-15:]
        lines.append(f"{log.name} of {log.parent.name}:\n" + "\n".join(text))
    return "\n".join(lines)
