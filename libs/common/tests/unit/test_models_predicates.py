"""EphemeralRunner predicates used by scale-down and deletion (never kill a busy runner)."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.models import EphemeralRunner, EphemeralRunnerPhase


def runner(
    status: dict[str, Any] | None = None, pod_spec: dict[str, Any] | None = None
) -> EphemeralRunner:
    doc: dict[str, Any] = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner"}
    doc["spec"] = {"githubConfigUrl": "u", "githubConfigSecret": "s", "runnerScaleSetId": 1}
    if pod_spec is not None:
        doc["spec"]["spec"] = pod_spec
    if status is not None:
        doc["status"] = status
    return EphemeralRunner.from_manifest(doc)


@pytest.mark.parametrize(
    ("phase", "done"),
    [
        ("", False),
        ("Pending", False),
        ("Running", False),
        ("Succeeded", True),
        ("Failed", True),
        ("Outdated", True),
    ],
)
def test_is_done(phase: str, done: bool) -> None:
    assert runner({"phase": phase}).is_done() is done


def test_no_status_is_neither_done_nor_busy() -> None:
    er = runner()
    assert not er.is_done()
    assert not er.has_job()


def test_phase_enum_compares_with_plain_strings() -> None:
    assert runner({"phase": "Failed"}).status.phase == EphemeralRunnerPhase.FAILED  # type: ignore[union-attr]


def test_has_job_uses_job_id() -> None:
    assert runner({"jobId": "abc"}).has_job()
    assert not runner({"jobId": "", "jobRequestId": 5}).has_job()


def test_container_hook_detected_only_on_the_runner_container() -> None:
    hook = {"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/home/runner/k8s/index.js"}
    on_runner = {"containers": [{"name": "runner", "env": [{"name": "A", "value": "1"}, hook]}]}
    on_sidecar = {"containers": [{"name": "runner"}, {"name": "dind", "env": [hook]}]}
    assert runner(pod_spec=on_runner).has_container_hook_configured()
    assert not runner(pod_spec=on_sidecar).has_container_hook_configured()
    assert not runner(pod_spec={}).has_container_hook_configured()
    assert not runner().has_container_hook_configured()
