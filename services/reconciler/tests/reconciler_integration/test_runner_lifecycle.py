"""EphemeralRunner life: busy and unregistered runners survive scale-down, deletion waits for
a running job, pod failure backoff (fake clock), exit 7 -> Outdated, container-hook cleanup,
``runner.lifecycle`` events.

The registrar is the harness's responder on purpose (these tests choose its answers: an
upstream error, a job still running, a name registered in this or another scale set), so a
removal is checked on its call log, the reconciler's boundary; the real registrar and the
Actions simulator are ``test_end_to_end.py``'s and ``test_slots.py``'s. A check that nothing
happened looks only once the change was handled (``Stack.handled``, or the responder's answer
seen taken), never after a fixed wait (ADR 0083)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from arcflow.common.constants import LABEL_RUNNER_POD
from arcflow.common.events import RunnerLifecycle
from arcflow.common.kube import NotFoundError
from tests.polling import eventually

from .harness import Stack, ars_manifest, runner_template

pytestmark = pytest.mark.integration


def _terminated(exit_code: int) -> dict[str, Any]:
    return {
        "phase": "Failed" if exit_code else "Succeeded",
        "containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": exit_code}}}],
    }


RUNNING = {
    "phase": "Running",
    "containerStatuses": [{"name": "runner", "state": {"running": {}}}],
    "conditions": [{"type": "Ready", "status": "True"}],
}


async def _solo(stack: Stack, **spec: Any) -> None:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo", **spec))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers)


def _replicas(count: int) -> Callable[[dict[str, Any] | None], bool]:
    """A runner set's cached document asks for ``count`` runners."""
    return lambda ers: ers is not None and (ers["spec"].get("replicas") or 0) == count


def _failures(count: int) -> Callable[[dict[str, Any] | None], bool]:
    """A runner's cached document records ``count`` pod failures."""
    return lambda er: (
        er is not None and len((er.get("status") or {}).get("failures") or {}) == count
    )


async def _runners(stack: Stack) -> list[dict[str, Any]]:
    return await stack.list("EphemeralRunner")


async def _registered(stack: Stack, n: int) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | None:
        runners = await _runners(stack)
        ok = len(runners) == n and all((r.get("status") or {}).get("runnerId") for r in runners)
        return runners if ok else None

    result: list[dict[str, Any]] = await eventually(check)
    return result


async def test_scale_down_never_removes_busy_or_unregistered_runners(stack: Stack) -> None:
    await _solo(stack)
    stack.rpc.jit_unavailable = True  # runners exist but are not registered (runnerId 0)
    await stack.scale("solo", 2, 0)

    async def two() -> bool:
        return len(await _runners(stack)) == 2

    await eventually(two)
    await stack.scale("solo", 0, 0)
    await stack.handled("EphemeralRunnerSet", "solo", _replicas(0))  # the forced scale-down
    runners = await _runners(stack)
    assert len(runners) == 2  # unregistered: never removed
    assert not any(r["metadata"].get("deletionTimestamp") for r in runners)
    assert stack.rpc.remove_requests == []

    stack.rpc.jit_unavailable = False
    await stack.app.resync()  # the periodic resync: the runners ask for their JIT configs again
    await stack.scale("solo", 2, 0)
    runners = await _registered(stack, 2)
    busy = runners[0]["metadata"]["name"]
    await stack.set_runner_status(busy, {"phase": "Running", "jobId": "job-1"})
    await stack.set_runner_status(runners[1]["metadata"]["name"], {"phase": "Running"})
    await stack.scale("solo", 0, 0)

    async def only_busy_left() -> bool:
        return [r["metadata"]["name"] for r in await _runners(stack)] == [busy]

    await eventually(only_busy_left)
    assert runners[0]["status"]["runnerId"] not in stack.rpc.remove_requests
    assert runners[1]["status"]["runnerId"] in stack.rpc.removed


async def test_deletion_removes_the_runner_first_and_waits_for_its_job(stack: Stack) -> None:
    await _solo(stack)
    await stack.scale("solo", 1, 0)
    er = (await _registered(stack, 1))[0]
    name, runner_id = er["metadata"]["name"], er["status"]["runnerId"]
    stack.rpc.busy_runner_ids.add(runner_id)

    await stack.kube.delete("EphemeralRunner", name, namespace=stack.namespace)

    async def asked_again() -> bool:
        # Each answer "job still running" is taken by a pass that keeps the runner and its
        # pod and looks again 0.2 s later, which asks again: a third request, two such passes.
        asked = stack.rpc.remove_requests.count(runner_id)
        assert asked >= 3, f"{asked} removal request(s) of {runner_id}"
        return True

    await eventually(asked_again, what="the removal asked again while the job runs")
    live = await stack.kube.get("EphemeralRunner", name, stack.namespace)
    assert live["metadata"]["deletionTimestamp"]
    pod = await stack.kube.get("Pod", name, stack.namespace)
    assert not pod["metadata"].get("deletionTimestamp")
    assert runner_id not in stack.rpc.removed

    stack.rpc.busy_runner_ids.clear()  # the job finished

    async def gone() -> bool:
        names = {r["metadata"]["name"] for r in await _runners(stack)}
        pods = {p["metadata"]["name"] for p in await stack.list("Pod")}
        return name not in names and name not in pods

    await eventually(gone)
    assert runner_id in stack.rpc.removed


async def test_pod_failures_back_off_by_the_table_then_the_runner_goes(stack: Stack) -> None:
    stack.clock.frozen = datetime(2026, 1, 1, tzinfo=UTC)
    await _solo(stack)
    await stack.scale("solo", 1, 1)
    er = (await _registered(stack, 1))[0]
    name = er["metadata"]["name"]

    async def pod_uid() -> str | None:
        pods = [p for p in await stack.list("Pod") if p["metadata"]["name"] == name]
        return (
            pods[0]["metadata"]["uid"]
            if pods and not pods[0]["metadata"].get("deletionTimestamp")
            else None
        )

    first = await eventually(pod_uid)
    await stack.set_pod_status(name, _terminated(1))

    async def one_failure() -> bool:
        live = await stack.kube.get("EphemeralRunner", name, stack.namespace)
        return len((live.get("status") or {}).get("failures") or {}) == 1

    await eventually(one_failure)
    await stack.handled("EphemeralRunner", name, _failures(1))  # the pass that saw it ended
    assert await pod_uid() is None  # 5 s backoff after one failure: no new pod yet

    stack.clock.frozen += timedelta(seconds=5)
    await stack.app.resync()  # the periodic resync stands for the backoff's own requeue
    second = await eventually(pod_uid)
    assert second != first

    # more than 5 failures: the runner is deleted (the clock moves past each backoff)
    for failed in range(2, 7):
        uid = await eventually(pod_uid)
        await stack.set_pod_status(name, _terminated(1))

        async def recorded(count: int = failed) -> bool:
            try:
                live = await stack.kube.get("EphemeralRunner", name, stack.namespace)
            except NotFoundError:
                return True  # the sixth failure: the runner went already
            return len((live.get("status") or {}).get("failures") or {}) >= count

        await eventually(recorded, what=f"{failed} pod failures in the runner's status")
        stack.clock.frozen += timedelta(seconds=100)  # past the longest backoff (80 s)
        await stack.app.resync()

        async def replaced(old: str = uid) -> bool:
            current = await pod_uid()
            runners = {r["metadata"]["name"] for r in await _runners(stack)}
            return name not in runners or (current is not None and current != old)

        await eventually(replaced)

    async def runner_gone() -> bool:
        return name not in {r["metadata"]["name"] for r in await _runners(stack)}

    await eventually(runner_gone)


async def test_exit_7_marks_outdated_and_publishes_lifecycle_events(stack: Stack) -> None:
    await _solo(stack)
    await stack.scale("solo", 1, 1)
    er = (await _registered(stack, 1))[0]
    name, runner_id = er["metadata"]["name"], er["status"]["runnerId"]
    await stack.set_pod_status(name, RUNNING)

    async def phase_is(phase: str) -> bool:
        live = await stack.kube.get("EphemeralRunner", name, stack.namespace)
        return (live.get("status") or {}).get("phase") == phase

    await eventually(lambda: phase_is("Running"))
    await stack.set_pod_status(name, _terminated(7))

    async def outdated_removed() -> bool:
        # the ARS then recreates the set, so the runner may already be gone
        return runner_id in stack.rpc.removed

    await eventually(outdated_removed)
    lifecycle = [e for e in await stack.all_events() if isinstance(e, RunnerLifecycle)]
    phases = [(e.previous_phase, e.phase) for e in lifecycle if e.runner_name == name]
    assert ("Pending", "Running") in phases or (None, "Running") in phases
    assert ("Running", "Outdated") in phases
    outdated = next(e for e in lifecycle if e.phase == "Outdated")
    assert outdated.runner_id == runner_id
    assert outdated.reason == "Outdated"
    assert outdated.keys.namespace == stack.namespace
    assert outdated.keys.ars == "solo"


async def test_container_hook_objects_are_deleted_with_the_runner(stack: Stack) -> None:
    template = runner_template("runner:k8s")
    template["spec"]["containers"][0]["env"] = [
        {"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/home/runner/k8s/index.js"}
    ]
    await _solo(stack, template=template)
    await stack.scale("solo", 1, 1)
    name = (await _registered(stack, 1))[0]["metadata"]["name"]
    labels = {LABEL_RUNNER_POD: name}
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-workflow",
                "namespace": stack.namespace,
                "labels": labels,
            },
            "spec": {"containers": [{"name": "job", "image": "node:20"}]},
        }
    )
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-secret", "namespace": stack.namespace, "labels": labels},
            "data": {},
        }
    )
    await stack.kube.delete("EphemeralRunner", name, namespace=stack.namespace)

    async def hook_objects_gone() -> bool:
        pods = {p["metadata"]["name"] for p in await stack.list("Pod")}
        secrets = {s["metadata"]["name"] for s in await stack.list("Secret")}
        return f"{name}-workflow" not in pods and f"{name}-secret" not in secrets

    await eventually(hook_objects_gone)


async def test_runner_exists_same_scale_set_is_removed_and_retried(stack: Stack) -> None:
    await _solo(stack)
    stack.rpc.jit_unavailable = True
    await stack.scale("solo", 1, 1)

    async def one() -> str | None:
        runners = await _runners(stack)
        return runners[0]["metadata"]["name"] if runners else None

    name = await eventually(one)
    stack.rpc.registered[name] = {"id": 555, "name": name, "runner_scale_set_id": 7}
    stack.rpc.jit_unavailable = False
    er = (await _registered(stack, 1))[0]
    assert er["metadata"]["name"] == name
    assert 555 in stack.rpc.removed  # the stale registration went first
    assert er["status"]["runnerId"] != 555


async def test_runner_exists_in_another_scale_set_deletes_the_runner(stack: Stack) -> None:
    await _solo(stack)
    stack.rpc.jit_unavailable = True
    await stack.scale("solo", 1, 1)

    async def one() -> str | None:
        runners = await _runners(stack)
        return runners[0]["metadata"]["name"] if runners else None

    name = await eventually(one)
    stack.rpc.registered[name] = {"id": 556, "name": name, "runner_scale_set_id": 99}
    stack.rpc.jit_unavailable = False

    async def deleted() -> bool:
        return name not in {r["metadata"]["name"] for r in await _runners(stack)}

    await eventually(deleted)
    await stack.handled("EphemeralRunner", name, lambda er: er is None)
    assert 556 not in stack.rpc.remove_requests  # another set's runner is never deregistered


async def test_a_served_scale_request_is_not_served_again_after_its_runner_finished(
    stack: Stack,
) -> None:
    """The runner of patch 1 finishes and is deleted before the listener lowers the replicas:
    no replacement runner (one job, one runner), until a new patch asks again."""
    await _solo(stack)
    await stack.scale("solo", 1, 1)
    first = (await _registered(stack, 1))[0]["metadata"]["name"]
    await stack.set_pod_status(first, _terminated(0))

    async def gone() -> bool:
        return first not in {r["metadata"]["name"] for r in await _runners(stack)}

    await eventually(gone)
    await stack.wait_idle()
    assert await _runners(stack) == []
    assert len(stack.rpc.jit_requests) == 1

    await stack.scale("solo", 1, 2)  # a new request is served
    await _registered(stack, 1)


def _init_crash_loop(exit_code: int) -> dict[str, Any]:
    """A kubelet's status of a pod whose init container exited ``exit_code`` and waits to be
    restarted (``restartPolicy: Always``, the API server's default): the pod stays Pending."""
    return {
        "phase": "Pending",
        "conditions": [
            {"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized"}
        ],
        "initContainerStatuses": [
            {
                "name": "setup",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
            }
        ],
        "containerStatuses": [
            {"name": "runner", "state": {"waiting": {"reason": "PodInitializing"}}}
        ],
    }


async def test_a_failed_init_container_fails_the_pod_at_once_and_names_itself(
    stack: Stack,
) -> None:
    """Upstream #4457: an init container that exits non-zero is a failed pod now, not at the
    reaper's 10-minute Init deadline: a Warning Event names the container and its exit code,
    the failure is recorded, and the runner gets a new pod after the back-off."""
    stack.clock.frozen = datetime(2026, 1, 1, tzinfo=UTC)
    template = runner_template("runner:1")
    template["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox", "command": ["false"]}
    ]
    await _solo(stack, template=template)
    await stack.scale("solo", 1, 1)
    name = (await _registered(stack, 1))[0]["metadata"]["name"]

    async def live_pod_uid() -> str | None:
        pods = [p for p in await stack.list("Pod") if p["metadata"]["name"] == name]
        alive = pods and not pods[0]["metadata"].get("deletionTimestamp")
        return pods[0]["metadata"]["uid"] if alive else None

    first = await eventually(live_pod_uid, what="the runner pod")
    await stack.set_pod_status(name, _init_crash_loop(3))

    async def failure_recorded() -> dict[str, Any] | None:
        status = (await stack.kube.get("EphemeralRunner", name, stack.namespace)).get("status")
        return status if first in ((status or {}).get("failures") or {}) else None

    status = await eventually(failure_recorded, what="the init failure in the runner's status")
    assert status["reason"] == "RunnerInitContainerFailed"
    assert status["message"] == "init container setup exited with code 3 (Error)"
    events = await stack.events("RunnerInitContainerFailed", name)
    assert len(events) == 1, events
    assert events[0]["type"] == "Warning"
    assert "init container setup exited with code 3" in events[0]["message"]
    assert not await stack.events("RunnerPodStuck", name)  # not the reaper

    stack.clock.frozen += timedelta(seconds=5)  # past the first back-off
    await stack.app.resync()

    async def replaced() -> bool:
        uid = await live_pod_uid()
        return uid is not None and uid != first

    await eventually(replaced, what="a new runner pod")
    await stack.wait_idle()
    assert len(await stack.events("RunnerInitContainerFailed", name)) == 1
