"""The EphemeralRunner rules: upstream's failure backoff, the registration written along, an
init container that failed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from arcflow.common.models import Pod
from arcflow.reconciler.controllers.runner_rules import (
    FailedInit,
    Registration,
    backoff_remaining,
    failed_init_container,
    registration_status,
)


def test_failure_backoff() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert backoff_remaining({}, now) == 0
    assert backoff_remaining({"u1": "2026-01-01T00:00:08Z"}, now) == 3.0  # 5 s after 1 failure


def test_a_registration_is_written_as_the_status_fields_upstream_uses() -> None:
    registration = Registration(42, "runner-abc")
    assert registration.status() == {"runnerId": 42, "runnerName": "runner-abc"}
    assert registration_status(registration) == registration.status()
    assert registration_status(None) == {}


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
