"""The EphemeralRunner rules: upstream's failure backoff, the registration written along, an
init container that failed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from arcflow.common.constants import ANNOTATION_JOB_COMPLETED
from arcflow.common.models import EphemeralRunnerStatus, Pod
from arcflow.reconciler.controllers.runner_rules import (
    FailedInit,
    Registration,
    backoff_remaining,
    failed_init_container,
    hung_after_job,
    job_completed_at,
    oom_killed,
    registration_status,
)


def test_failure_backoff() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert backoff_remaining({}, now) == 0
    assert backoff_remaining({"u1": "2026-01-01T00:00:08Z"}, now) == 3.0  # 5 s after 1 failure


def _written(status: EphemeralRunnerStatus) -> dict[str, Any]:
    """What a status write sends: the fields that were set."""
    return status.model_dump(by_alias=True, exclude_unset=True, mode="json")


def test_a_registration_is_written_as_the_status_fields_upstream_uses() -> None:
    registration = Registration(42, "runner-abc")
    assert _written(registration.status()) == {"runnerId": 42, "runnerName": "runner-abc"}
    assert _written(registration_status(registration)) == _written(registration.status())
    assert _written(registration_status(None)) == {}
    failed = EphemeralRunnerStatus(phase="Failed", reason="InvalidPod", message="no")
    assert _written(registration_status(registration, failed)) == {
        "phase": "Failed",
        "reason": "InvalidPod",
        "message": "no",
        "runnerId": 42,
        "runnerName": "runner-abc",
    }
    assert _written(registration_status(None, failed)) == {
        "phase": "Failed",
        "reason": "InvalidPod",
        "message": "no",
    }
    assert _written(failed) == {"phase": "Failed", "reason": "InvalidPod", "message": "no"}


def _pod(status: dict[str, Any], init: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "runner"}]}
    if init is not None:
        spec["initContainers"] = init
    return Pod.from_manifest(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "r"},
            "spec": spec,
            "status": status,
        }
    )


def _init_status(name: str, **states: Any) -> dict[str, Any]:
    return {"initContainerStatuses": [{"name": name, **states}]}


def test_an_init_container_that_exited_non_zero_is_found_now_or_before_its_restart() -> None:
    ended = {"terminated": {"exitCode": 2, "reason": "Error"}}
    failed = failed_init_container(_pod(_init_status("setup", state=ended)))
    assert failed == FailedInit("setup", 2, "Error")
    assert failed.message == "init container setup exited with code 2 (Error)"
    looping = _init_status(
        "setup", state={"waiting": {"reason": "CrashLoopBackOff"}}, lastState=ended
    )
    assert failed_init_container(_pod(looping)) == FailedInit("setup", 2, "Error")


def test_init_containers_that_succeed_run_or_are_sidecars_are_not_failures() -> None:
    ok = {"terminated": {"exitCode": 0}}
    assert failed_init_container(_pod(_init_status("setup", state=ok))) is None
    assert failed_init_container(_pod(_init_status("setup", state={"running": {}}))) is None
    assert failed_init_container(_pod({})) is None
    sidecar = [{"name": "proxy", "restartPolicy": "Always"}]
    crashed = _init_status(
        "proxy", lastState={"terminated": {"exitCode": 1}}, state={"running": {}}
    )
    assert failed_init_container(_pod(crashed, sidecar)) is None
    initialized = {**crashed, "conditions": [{"type": "Initialized", "status": "True"}]}
    assert failed_init_container(_pod(initialized)) is None


def _runner_pod(state: dict[str, Any], phase: str = "Running") -> Pod:
    return _pod({"phase": phase, "containerStatuses": [{"name": "runner", "state": state}]})


def test_a_runner_alive_after_its_job_is_stopped_once_the_grace_period_is_over() -> None:
    """ADR 0100: seconds left of the grace period after GitHub completed the job, while the
    runner container still runs; nothing when it ended, the job is not known done, the
    annotation is unusable or the check is off."""
    done = {ANNOTATION_JOB_COMPLETED: "2026-12-02T12:00:00Z"}
    at = job_completed_at(done)
    assert at == datetime(2026, 12, 2, 12, tzinfo=UTC).timestamp()
    running = _runner_pod({"running": {}})
    assert hung_after_job(done, running, at + 30, 120) == 90
    assert hung_after_job(done, running, at + 121, 120) == -1
    sidecar_up = _runner_pod({"waiting": {"reason": "CrashLoopBackOff"}})
    assert hung_after_job(done, sidecar_up, at + 200, 120) == -80
    ended = _runner_pod({"terminated": {"exitCode": 0}})
    assert hung_after_job(done, ended, at + 200, 120) is None
    assert hung_after_job(done, _runner_pod({"running": {}}, "Succeeded"), at + 200, 120) is None
    assert hung_after_job(done, None, at + 200, 120) is None
    assert hung_after_job({}, running, at + 200, 120) is None
    assert hung_after_job(done, running, at + 200, 0) is None
    assert job_completed_at({ANNOTATION_JOB_COMPLETED: "yesterday"}) is None


def test_a_runner_container_killed_for_memory_is_told_apart_from_other_exits() -> None:
    assert oom_killed(_runner_pod({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))
    assert not oom_killed(_runner_pod({"terminated": {"exitCode": 137, "reason": "Error"}}))
    assert not oom_killed(_runner_pod({"running": {}}))
