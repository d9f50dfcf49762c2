"""What a kubelet reports in a Pod's ``status`` (pure): Pending once admitted, Running,
Succeeded or Failed with the exit code, or waiting on an image it cannot pull."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from arcflow.devstack.kubelet import NODE_IP


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(at: str, *, ready: bool, initialized: bool = True) -> list[dict[str, str]]:
    """A kubelet's pod conditions: scheduled (bound), initialized (no init containers here),
    containers ready and pod ready (both only while the container runs)."""
    flags = (
        ("PodScheduled", True),
        ("Initialized", initialized),
        ("ContainersReady", ready),
        ("Ready", ready),
    )
    return [
        {"type": kind, "status": "True" if value else "False", "lastTransitionTime": at}
        for kind, value in flags
    ]


def _addresses(node_ip: str) -> dict[str, Any]:
    """Host and pod IP: every played pod shares the node's loopback (no network namespace)."""
    return {
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "podIP": node_ip,
        "podIPs": [{"ip": node_ip}],
    }


def _container_statuses(
    pod: Mapping[str, Any], state: dict[str, Any], *, ready: bool, started: bool
) -> list[dict[str, Any]]:
    return [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": ready,
            "started": started,
            "restartCount": 0,
            "state": {key: dict(value) for key, value in state.items()},
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]


def pending_status(
    pod: Mapping[str, Any], started_at: str, *, node_ip: str = NODE_IP
) -> dict[str, Any]:
    """What a kubelet reports once it admitted the pod and before the container runs."""
    return {
        "phase": "Pending",
        "startTime": started_at,
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "conditions": _conditions(started_at, ready=False),
        "containerStatuses": _container_statuses(
            pod, {"waiting": {"reason": "ContainerCreating"}}, ready=False, started=False
        ),
    }


def running_status(
    pod: Mapping[str, Any], started_at: str, *, node_ip: str = NODE_IP
) -> dict[str, Any]:
    return {
        "phase": "Running",
        "startTime": started_at,
        **_addresses(node_ip),
        "conditions": _conditions(started_at, ready=True),
        "containerStatuses": _container_statuses(
            pod, {"running": {"startedAt": started_at}}, ready=True, started=True
        ),
    }


def terminated_status(
    pod: Mapping[str, Any],
    started_at: str,
    finished_at: str,
    exit_code: int,
    message: str = "",
    *,
    node_ip: str = NODE_IP,
) -> dict[str, Any]:
    """What a kubelet reports when the (only) container ended with ``exit_code``."""
    terminated: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": started_at,
        "finishedAt": finished_at,
    }
    if message:
        terminated["message"] = message
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "startTime": started_at,
        **_addresses(node_ip),
        "conditions": _conditions(finished_at, ready=False),
        "containerStatuses": _container_statuses(
            pod, {"terminated": terminated}, ready=False, started=False
        ),
    }


def image_pull_status(pod: Mapping[str, Any], started_at: str, reason: str) -> dict[str, Any]:
    """A pod whose image cannot be pulled: Pending, bound, the containers waiting."""
    status = pending_status(pod, started_at)
    message = "Back-off pulling image" if reason == "ImagePullBackOff" else "failed to pull image"
    for container in status["containerStatuses"]:
        container["state"] = {
            "waiting": {"reason": reason, "message": f'{message} "{container["image"]}"'}
        }
    return status
