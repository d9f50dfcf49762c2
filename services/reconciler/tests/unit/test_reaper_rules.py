"""The stuck-pod deadline rules (reaper_rules.py, ADR 0065): pure, on parsed pods."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.models import Pod
from arcflow.reconciler.controllers.reaper_rules import (
    Deadlines,
    DeadlineSyntaxError,
    deadlines_for,
    parse_deadlines,
    pod_stage,
    recheck_after,
    stuck,
)

T0 = "2026-01-01T00:00:00Z"
EPOCH = 1767225600.0  # T0


def _pod(**fields: Any) -> Pod:
    """A runner pod as the reconciler reads it (the model of ADR 0071)."""
    return Pod.from_manifest(_pod_manifest(**fields))


def _pod_manifest(
    *,
    phase: str = "Pending",
    node: str | None = "node-a",
    waiting: str | None = None,
    init_waiting: str | None = None,
    initialized: bool = True,
    running: bool = False,
    ready: bool | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "True" if node else "False"}]
    conditions.append({"type": "Initialized", "status": str(initialized), "lastTransitionTime": T0})
    if ready is not None:
        conditions.append({"type": "Ready", "status": str(ready), "lastTransitionTime": T0})
    state: dict[str, Any] = {}
    if waiting:
        state = {"waiting": {"reason": waiting}}
    if running:
        state = {"running": {"startedAt": T0}}
    status: dict[str, Any] = {
        "phase": phase,
        "startTime": T0,
        "conditions": conditions,
        "containerStatuses": [{"name": "runner", "state": state}],
    }
    if init_waiting is not None:
        status["initContainerStatuses"] = [
            {"name": "init", "state": {"waiting": {"reason": init_waiting}}}
        ]
    if reason:
        status["reason"] = reason
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": "r", "creationTimestamp": T0}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("pod", "stage", "reason"),
    [
        (_pod(node=None), "Pending", ""),
        (_pod(waiting="ErrImagePull"), "ImagePull", "ErrImagePull"),
        (_pod(waiting="ImagePullBackOff"), "ImagePull", "ImagePullBackOff"),
        (_pod(init_waiting="ImagePullBackOff", initialized=False), "ImagePull", "ImagePullBackOff"),
        (_pod(init_waiting="PodInitializing", initialized=False), "Init", "PodInitializing"),
        (_pod(waiting="ContainerCreating"), "ContainerCreating", "ContainerCreating"),
        (_pod(phase="Running", running=True, ready=False), "NodeLost", "NodeNotReady"),
        (
            _pod(phase="Running", running=True, ready=True, reason="NodeLost"),
            "NodeLost",
            "NodeLost",
        ),
    ],
)
def test_each_stage_is_read_from_the_pod_status(pod: Pod, stage: str, reason: str) -> None:
    found = pod_stage(pod)
    assert found is not None
    assert found[:2] == (stage, reason)


@pytest.mark.parametrize(
    "pod",
    [
        _pod(phase="Running", running=True, ready=True),
        _pod(phase="Succeeded"),
        _pod(phase="Failed"),
        Pod.from_manifest(
            {**_pod_manifest(waiting="ErrImagePull"), "metadata": {"deletionTimestamp": T0}}
        ),
    ],
)
def test_a_running_finished_or_deleted_pod_is_past_start_up(pod: Pod) -> None:
    assert pod_stage(pod) is None
    assert stuck(pod, EPOCH + 10_000, Deadlines()) is None


def test_a_pod_is_stuck_only_past_its_stage_deadline() -> None:
    pod = _pod(waiting="ImagePullBackOff")
    deadlines = Deadlines(image_pull=30)
    assert stuck(pod, EPOCH + 29, deadlines) is None
    assert recheck_after(pod, EPOCH + 29, deadlines) == pytest.approx(1)
    verdict = stuck(pod, EPOCH + 31, deadlines)
    assert verdict is not None
    assert (verdict.stage, verdict.reason, verdict.deadline) == (
        "ImagePull",
        "ImagePullBackOff",
        30,
    )
    assert "ImagePull (ImagePullBackOff)" in verdict.message
    # 0 turns a deadline off
    assert stuck(pod, EPOCH + 10_000, Deadlines(image_pull=0)) is None


def test_node_lost_said_by_the_control_plane_needs_no_grace() -> None:
    pod = _pod(phase="Running", running=True, ready=True, reason="NodeLost")
    verdict = stuck(pod, EPOCH, Deadlines(node_lost=600))
    assert verdict is not None
    assert verdict.stage == "NodeLost"


def test_deadline_syntax() -> None:
    parsed = parse_deadlines(
        "pending=2m, imagePull=30s,init=1h,container-creating=45,nodeLost=0", Deadlines()
    )
    assert parsed == Deadlines(
        pending=120, image_pull=30, init=3600, container_creating=45, node_lost=0
    )
    for bad in ("pending", "pending=soon", "nap=1m", "imagePull=-1"):
        with pytest.raises(DeadlineSyntaxError):
            parse_deadlines(bad, Deadlines())


def test_set_and_variant_annotations_override_the_defaults_key_by_key() -> None:
    base = Deadlines()
    annotations = {
        "arcflow.dev/runner-deadlines": "imagePull=1m",
        "arcflow.dev/runner-deadlines.gpu": "pending=20m",
    }
    gpu, error = deadlines_for(annotations, "gpu", base)
    assert error is None
    assert (gpu.image_pull, gpu.pending, gpu.init) == (60, 1200, base.init)
    small, _ = deadlines_for(annotations, "small", base)
    assert (small.image_pull, small.pending) == (60, base.pending)
    kept, error = deadlines_for({"arcflow.dev/runner-deadlines": "imagePull=fast"}, "", base)
    assert kept == base
    assert error is not None
    assert "imagePull=fast" in error
