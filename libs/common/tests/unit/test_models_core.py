"""The read models of the children the reconciler follows (ADR 0071): Pod and Secret."""

from __future__ import annotations

import base64
from typing import Any

from arcflow.common.models import Pod, ResourceQuota, Secret

TOKEN = "ghp_not-in-any-repr-0123456789"


def _pod(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "r", "namespace": "ns", "uid": "u1"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "runner", "image": "i"}]},
        "status": status,
    }


def test_a_pod_reads_phase_conditions_and_the_runner_container_state() -> None:
    doc = _pod(
        {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "sidecar", "state": {"running": {}}},
                {"name": "runner", "state": {"terminated": {"exitCode": 7, "reason": "Error"}}},
            ],
        }
    )
    pod = Pod.from_observed(doc)
    assert pod.phase == "Running"
    assert pod.status.is_true("Ready")
    assert not pod.status.is_true("PodScheduled")
    assert pod.spec.node_name == "node-a"
    state = pod.runner_state
    assert state is not None
    assert state.terminated is not None
    assert state.terminated.exit_code == 7
    # What is not modelled stays as the document holds it, shared (ADR 0050).
    assert pod.manifest is doc
    assert pod.to_manifest()["spec"]["containers"] == doc["spec"]["containers"]


def test_a_pod_before_the_kubelet_reports_has_no_runner_state() -> None:
    pod = Pod.from_observed(_pod({"phase": "Pending"}))
    assert pod.runner_state is None
    assert Pod.from_observed({"metadata": {"name": "listed-item"}}).phase == ""


def test_a_secret_keeps_its_values_out_of_the_model_and_its_repr() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "jit", "namespace": "ns"},
        "type": "Opaque",
        "data": {"jitToken": base64.b64encode(TOKEN.encode()).decode()},
        "stringData": {"other": TOKEN},
    }
    secret = Secret.from_observed(doc)
    assert secret.decoded_data() == {"jitToken": TOKEN}
    for text in (repr(secret), str(secret), str(secret.model_dump()), str(secret.to_manifest())):
        assert TOKEN not in text
        assert base64.b64encode(TOKEN.encode()).decode() not in text


def test_a_resource_quota_reads_its_hard_limits_and_keeps_the_rest() -> None:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "ns"},
        "spec": {"hard": {"pods": "10", "requests.cpu": "4"}, "scopes": ["NotBestEffort"]},
        "status": {"used": {"pods": "2"}},
    }
    quota = ResourceQuota.from_observed(doc)
    assert quota.spec.hard == {"pods": "10", "requests.cpu": "4"}
    assert quota.to_manifest() == doc
    assert ResourceQuota.from_observed({"metadata": {"name": "q"}}).spec.hard is None
