"""The pure parts of ``arcflow dev --kube node``: the example adapted to the node's runner image,
and the pods the kubelet runs read as the view's records and the services' states."""

from __future__ import annotations

from typing import Any

from arcflow.common import constants
from arcflow.devstack.demo import find_example, load_example_ars
from arcflow.devstack.node.stack import NodePods, on_node

IMAGE = "localhost/arcflow/runner:1.2.3"


def _pod(
    name: str,
    namespace: str,
    labels: dict[str, str],
    state: dict[str, Any] | None = None,
    *,
    ready: bool = False,
    restarts: int = 0,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if state is not None:
        status["containerStatuses"] = [{"name": "c", "state": state, "restartCount": restarts}]
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
        "spec": {"containers": [{"name": "c"}]},
        "status": status,
    }


def test_every_template_of_the_example_becomes_the_runner_image() -> None:
    example = find_example()
    assert example is not None
    ars = load_example_ars(example)
    adapted = on_node(ars, IMAGE)
    templates = [adapted["spec"]["template"]] + [
        v["template"] for v in adapted["spec"]["runnerVariants"] if "template" in v
    ]
    assert len(templates) == 3  # the set's, cpu-large's and gpu's
    for template in templates:
        (container,) = template["spec"]["containers"]
        assert container["image"] == IMAGE
        assert "nodeSelector" not in template["spec"]
        assert "nvidia.com/gpu" not in str(container["resources"])
    # names, labels and bounds as written; the input is not changed
    assert [v["name"] for v in adapted["spec"]["runnerVariants"]] == [
        "cpu-small",
        "cpu-large",
        "gpu",
    ]
    assert adapted["spec"]["runnerVariants"][1]["maxRunners"] == 4
    assert ars["spec"]["template"]["spec"]["containers"][0]["image"] != IMAGE


def test_a_runner_pod_is_recorded_from_created_to_exited() -> None:
    pods = NodePods()
    labels = {constants.LABEL_EPHEMERAL_RUNNER: "True"}
    pods.observe("ADDED", _pod("r-1", "arc-runners", labels))
    (record,) = pods.records.values()
    assert (record.kind, record.active, record.started_at) == ("runner", True, None)
    pods.observe("MODIFIED", _pod("r-1", "arc-runners", labels, {"running": {}}))
    assert record.started_at is not None
    pods.observe("MODIFIED", _pod("r-1", "arc-runners", labels, {"terminated": {"exitCode": 0}}))
    assert (record.exit_code, record.active) == (0, False)
    pods.observe("DELETED", _pod("r-1", "arc-runners", labels))
    assert record.deleted


def test_a_listener_pod_in_the_release_namespace_is_a_listener_not_a_service() -> None:
    pods = NodePods()
    labels = {constants.LABEL_COMPONENT: constants.COMPONENT_LISTENER}
    pods.observe("ADDED", _pod("l-1", "arc-system", labels))
    assert [r.kind for r in pods.records.values()] == ["listener"]
    assert pods.services == {}


def test_a_service_pod_reads_as_starting_running_or_crash_looping() -> None:
    pods = NodePods()
    labels = {"app.kubernetes.io/component": "reconciler"}
    assert pods.service_status("reconciler") == "starting (no pod)"
    pods.observe("ADDED", _pod("rec-1", "arc-system", labels, {"waiting": {"reason": "x"}}))
    assert pods.service_status("reconciler") == "starting (pod rec-1: x)"
    crash = {"waiting": {"reason": "CrashLoopBackOff"}}
    pods.observe("MODIFIED", _pod("rec-1", "arc-system", labels, crash, restarts=3))
    assert pods.service_status("reconciler").startswith("crash loop")
    assert pods.restarts() == {"reconciler": 3}
    pods.observe("MODIFIED", _pod("rec-1", "arc-system", labels, {"running": {}}, ready=True))
    assert pods.service_status("reconciler") == "running (pod rec-1)"
    pods.observe("DELETED", _pod("rec-1", "arc-system", labels))
    assert pods.service_status("reconciler") == "starting (no pod)"
