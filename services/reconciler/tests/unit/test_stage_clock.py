"""The reconciler's runner stage clock (stages.py, ADR 0065): every stage once, in order."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.stages import RECONCILER_STAGES
from arcflow.reconciler.stages import StageClock, pod_moments


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pod(*, node: bool = False, state: str | None = None, ready: bool = False) -> dict[str, Any]:
    states = {"running": {"running": {}}, "terminated": {"terminated": {"exitCode": 0}}}
    return {
        "spec": {"nodeName": "n"} if node else {},
        "status": {
            "conditions": [{"type": "Ready", "status": str(ready)}],
            "containerStatuses": [{"name": "runner", "state": states.get(state or "", {})}],
        },
    }


def test_pod_moments() -> None:
    assert pod_moments(_pod()) == set()
    assert pod_moments(_pod(node=True)) == {"pod_scheduled"}
    assert pod_moments(_pod(node=True, state="running", ready=True)) == {
        "pod_scheduled",
        "containers_running",
        "runner_registered",
    }
    assert "terminated" in pod_moments(_pod(node=True, state="terminated"))


def test_a_runner_life_observes_each_stage_once_and_they_add_up() -> None:
    clock = Clock()
    seen: list[tuple[str, float, dict[str, str]]] = []
    stages = StageClock(lambda s, attrs: seen.append((attrs["stage"], s, attrs)), clock)
    er = {"metadata": {"name": "r1", "namespace": "ns"}}
    labels = {"actions.github.com/runner-variant": "gpu", "actions.github.com/organization": "o"}
    stages.request_seen("ers-uid", 7)
    clock.now += 0.5
    stages.request_seen("ers-uid", 7)  # the same request again: not a new start
    stages.runner_created(er, "ers-uid", labels, "set-gpu")
    for step, moment in ((0.2, "jit_config"),):
        clock.now += step
        stages.mark("ns", "r1", moment)
    clock.now += 0.1
    stages.pod_created("ns", "r1")
    clock.now += 0.1
    stages.observe("ns", "r1", _pod(node=True), has_job=False)
    clock.now += 2.0
    stages.observe("ns", "r1", _pod(node=True, state="running", ready=True), has_job=False)
    stages.observe("ns", "r1", _pod(node=True, state="running", ready=True), has_job=False)
    clock.now += 0.3
    stages.observe("ns", "r1", _pod(node=True, state="running", ready=True), has_job=True)
    clock.now += 1.0
    stages.observe("ns", "r1", _pod(node=True, state="terminated"), has_job=True)
    clock.now += 0.4
    stages.runner_gone("ns", "r1")
    by_stage = {stage: seconds for stage, seconds, _ in seen}
    assert len(seen) == len(by_stage), "a stage observed twice"
    assert set(by_stage) == RECONCILER_STAGES
    assert abs(by_stage["runner_created"] - 0.5) < 1e-9
    assert abs(by_stage["containers_running"] - 2.0) < 1e-9
    assert abs(by_stage["runner_gone"] - 0.4) < 1e-9
    to_job = sum(v for k, v in by_stage.items() if k != "runner_gone")
    assert abs(to_job - 3.2) < 1e-9
    attrs = seen[0][2]
    assert (attrs["name"], attrs["namespace"], attrs["variant"], attrs["organization"]) == (
        "set-gpu",
        "ns",
        "gpu",
        "o",
    )
    assert stages.runners == {}


def test_a_recreated_pod_starts_its_own_stages_again() -> None:
    clock = Clock()
    seen: list[str] = []
    stages = StageClock(lambda s, attrs: seen.append(attrs["stage"]), clock)
    stages.runner_created({"metadata": {"name": "r", "namespace": "ns"}}, "u", {}, "set")
    stages.pod_created("ns", "r")
    stages.observe("ns", "r", _pod(node=True), has_job=False)
    stages.pod_created("ns", "r")
    stages.observe("ns", "r", _pod(node=True), has_job=False)
    assert seen.count("pod_scheduled") == 2


def test_a_runner_another_replica_created_is_not_observed() -> None:
    seen: list[str] = []
    stages = StageClock(lambda s, attrs: seen.append(attrs["stage"]))
    stages.mark("ns", "unknown", "jit_config")
    stages.observe("ns", "unknown", _pod(node=True), has_job=True)
    stages.runner_gone("ns", "unknown")
    assert seen == []


def test_changes_are_marked_as_the_cache_receives_them() -> None:
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    ers = {"metadata": {"uid": "u", "name": "set"}, "spec": {"patchID": 3}}
    stages.observe_object("EphemeralRunnerSet", ers)
    clock.now += 0.25
    stages.runner_created({"metadata": {"name": "r", "namespace": "ns"}}, "u", {}, "set")
    stages.pod_created("ns", "r")
    pod = _pod(node=True, state="terminated")  # first seen finished: it ran, so it registered
    pod["metadata"] = {
        "name": "r",
        "namespace": "ns",
        "labels": {"actions-ephemeral-runner": "True"},
    }
    clock.now += 1.0
    stages.observe_object("Pod", pod)
    er = {"metadata": {"name": "r", "namespace": "ns"}, "status": {"jobRequestId": 9}}
    stages.observe_object("EphemeralRunner", er)
    assert seen["runner_created"] == 0.25
    assert seen["pod_scheduled"] == 1.0
    assert {"containers_running", "runner_registered", "job_started"} <= set(seen)


def test_a_pod_seen_before_its_create_returned_is_observed_once() -> None:
    seen: list[str] = []
    stages = StageClock(lambda s, attrs: seen.append(attrs["stage"]), Clock())
    stages.runner_created({"metadata": {"name": "r", "namespace": "ns"}}, "u", {}, "set")
    stages.observe("ns", "r", _pod(node=True, state="running", ready=True), has_job=False)
    stages.pod_created("ns", "r")
    stages.observe("ns", "r", _pod(node=True, state="running", ready=True), has_job=False)
    assert seen.count("containers_running") == 1


def _ers(patch_id: int, stamp: str | None = None, replicas: int | None = None) -> dict[str, Any]:
    annotations = {} if stamp is None else {"arcflow.io/scale-requested-at": stamp}
    return {
        "metadata": {"uid": "u", "name": "set", "annotations": annotations},
        "spec": {"patchID": patch_id, "replicas": replicas},
    }


def _er(name: str, patch_id: int | None) -> dict[str, Any]:
    annotations = {} if patch_id is None else {"actions.github.com/patch-id": str(patch_id)}
    return {"metadata": {"name": name, "namespace": "ns", "annotations": annotations}}


def test_runner_created_starts_at_the_listeners_stamp_of_its_patch() -> None:
    """The ERS patch's way to this cache is inside ``runner_created`` (ADR 0065)."""
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    stages.observe_object("EphemeralRunnerSet", _ers(4, f"4@{clock.now - 0.4:.3f}"))
    clock.now += 0.25
    stages.runner_created(_er("r", 4), "u", {}, "set")
    assert seen["runner_created"] == pytest.approx(0.65)


@pytest.mark.parametrize(
    "stamp",
    ["4@9999999999.000", "4@1.000", "3@999.900", "garbage", None],
    ids=["future", "implausibly-old", "another-patch", "not-a-stamp", "none"],
)
def test_an_implausible_stamp_starts_runner_created_when_the_patch_was_seen(
    stamp: str | None,
) -> None:
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    stages.observe_object("EphemeralRunnerSet", _ers(4, stamp))
    clock.now += 0.25
    stages.runner_created(_er("r", 4), "u", {}, "set")
    assert seen["runner_created"] == pytest.approx(0.25)


def test_a_runner_starts_at_the_request_it_was_created_for() -> None:
    """A later request seen while a pass for an earlier one still creates runners does not
    shorten those runners' ``runner_created``; a later metadata-only change (same patchID,
    new annotations) starts nothing again."""
    clock = Clock()
    seen: dict[str, list[float]] = {}
    stages = StageClock(lambda s, attrs: seen.setdefault(attrs["stage"], []).append(s), clock)
    stages.observe_object("EphemeralRunnerSet", _ers(4, f"4@{clock.now - 0.1:.3f}"))
    clock.now += 1.0
    five = _ers(5, f"5@{clock.now - 0.1:.3f}")
    stages.observe_object("EphemeralRunnerSet", five)
    clock.now += 0.2
    five["metadata"]["annotations"]["arcflow.io/capacity-share"] = "changed"
    stages.observe_object("EphemeralRunnerSet", five)
    clock.now += 0.3
    stages.runner_created(_er("a", 4), "u", {}, "set")
    stages.runner_created(_er("b", 5), "u", {}, "set")
    stages.runner_created(_er("c", None), "u", {}, "set")  # no annotation: the newest request
    assert seen["runner_created"] == pytest.approx([1.6, 0.6, 0.6])


def test_a_patch_id_that_comes_back_is_a_new_request() -> None:
    """patchID 0 again (the idle patch, or the first request of a restarted listener) starts
    anew; the same patchID seen again (a later event) does not."""
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    stages.observe_object("EphemeralRunnerSet", _ers(0))
    clock.now += 10.0
    stages.observe_object("EphemeralRunnerSet", _ers(1))
    clock.now += 10.0
    stages.observe_object("EphemeralRunnerSet", _ers(0))
    clock.now += 1.0
    stages.observe_object("EphemeralRunnerSet", _ers(0))
    clock.now += 1.0
    stages.runner_created(_er("r", 0), "u", {}, "set")
    assert seen["runner_created"] == pytest.approx(2.0)


Event = tuple[float, str, Any]


def _runner_created_starts(events: list[Event]) -> list[float]:
    """Events in time order: ``(at, "request", (patchID, replicas))``, ``(at, "create",
    name)`` (for the newest request seen by then), ``(at, "finish", name)`` (its pod seen
    terminated), ``(at, "cache", er)`` (an EphemeralRunner as the cache shows it). Returns
    each created runner's start (its ``runner_created`` subtracted from the create time)."""
    clock = Clock()
    starts: list[float] = []

    def record(seconds: float, attrs: dict[str, str]) -> None:
        if attrs["stage"] == "runner_created":
            starts.append(clock.now - seconds)

    stages = StageClock(record, clock)
    newest = 0
    for at, what, value in events:
        clock.now = at
        if what == "request":
            newest = value[0]
            stages.observe_object("EphemeralRunnerSet", _ers(newest, replicas=value[1]))
        elif what == "create":
            stages.runner_created(_er(value, newest), "u", {}, "set")
        elif what == "finish":
            pod = _pod(node=True, state="terminated")
            pod["metadata"] = {
                "name": value,
                "namespace": "ns",
                "labels": {"actions-ephemeral-runner": "True"},
            }
            stages.observe_object("Pod", pod)
        else:
            stages.observe_object("EphemeralRunner", value)
    return starts


def _cached_er(name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"kind": "EphemeralRunnerSet", "uid": "u", "name": "set"}],
        },
        "status": status,
    }


def test_a_runner_starts_at_the_request_that_first_asked_for_it() -> None:
    """Job A's runner finished; the request at 5.2 (A completed, B assigned: the same count)
    needs a new runner but its pass made none; the runner made at 9.1, after a later request
    with the same count, starts at 5.2: the wait is inside runner_created, not in no stage.
    A late status event of the finished runner does not count it again."""
    starts = _runner_created_starts(
        [
            (1.0, "request", (1, 1)),
            (1.1, "create", "a"),
            (5.0, "finish", "a"),
            (5.1, "cache", _cached_er("a", jobId="job-a")),
            (5.2, "request", (2, 1)),
            (9.0, "request", (3, 1)),
            (9.1, "create", "b"),
        ]
    )
    assert starts == pytest.approx([1.0, 5.2])


def test_runners_take_the_requests_first_in_first_out() -> None:
    creates: list[Event] = [(2.5 + i / 10, "create", f"r{i}") for i in range(5)]
    starts = _runner_created_starts([(1.0, "request", (1, 3)), (2.0, "request", (2, 5)), *creates])
    assert starts == pytest.approx([1.0, 1.0, 1.0, 2.0, 2.0])


def test_fewer_replicas_leave_only_as_many_waiting_and_the_rest_fall_back() -> None:
    """Asked for 3, then for 1 before any was made: one runner waits; a runner made beyond
    it starts at its own request (its patch-id)."""
    starts = _runner_created_starts(
        [
            (1.0, "request", (1, 3)),
            (2.0, "request", (2, 1)),
            (3.0, "create", "a"),
            (4.0, "create", "b"),
        ]
    )
    assert starts == pytest.approx([1.0, 2.0])


def test_runners_the_cache_shows_count_unless_done() -> None:
    """A runner another replica made (seen in the cache, running) leaves no room for a
    waiting one; a done one (phase Succeeded) or one being deleted does."""
    starts = _runner_created_starts(
        [
            (0.5, "cache", _cached_er("other", phase="Running")),
            (1.0, "request", (1, 1)),
            (1.5, "request", (2, 1)),
            (2.0, "create", "a"),  # a replacement: no request waited for it
        ]
    )
    assert starts == pytest.approx([1.5])  # its own request (patch-id), not the one at 1.0
    done = {"name": "gone", "namespace": "ns", "deletionTimestamp": "2026-12-01T00:00:00Z"}
    starts = _runner_created_starts(
        [
            (0.5, "cache", _cached_er("other", phase="Succeeded")),
            (0.6, "cache", {**_cached_er("gone"), "metadata": {**done}}),
            (1.0, "request", (1, 2)),
            (3.0, "request", (2, 2)),
            (4.0, "create", "a"),
            (4.1, "create", "b"),
        ]
    )
    assert starts == pytest.approx([1.0, 1.0])


def test_the_first_request_with_the_sets_initial_patch_id_is_new() -> None:
    """A new ERS holds patchID 0; the listener's first request is patchID 0 too (with its
    stamp): it is a new request, and the runner starts at its stamp."""
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    stages.observe_object("EphemeralRunnerSet", _ers(0, replicas=None))
    clock.now += 30.0
    stages.observe_object("EphemeralRunnerSet", _ers(0, f"0@{clock.now - 0.2:.3f}", replicas=1))
    stages.request_seen("u", 0)  # the controller's pass: no stamp known to it, the same request
    clock.now += 0.3
    stages.runner_created(_er("r", 0), "u", {}, "set")
    assert seen["runner_created"] == pytest.approx(0.5)


def test_a_job_seen_before_the_pods_ready_ends_the_pod_stages_then() -> None:
    """The runner's status names its job before the cache shows the pod Ready: the pod's
    remaining stages end at that moment (zero long), so job_started is still observed and
    the chain adds up."""
    clock = Clock()
    seen: dict[str, float] = {}
    stages = StageClock(lambda s, attrs: seen.__setitem__(attrs["stage"], s), clock)
    stages.runner_created(_er("r", None), "u", {}, "set")
    clock.now += 0.1
    stages.pod_created("ns", "r")
    clock.now += 0.2
    stages.observe("ns", "r", _pod(node=True), has_job=False)
    clock.now += 0.4
    stages.observe("ns", "r", None, has_job=True)
    clock.now += 0.1
    stages.observe("ns", "r", _pod(node=True, state="running", ready=True), has_job=True)
    assert seen["containers_running"] == pytest.approx(0.4)
    assert seen["runner_registered"] == 0
    assert seen["job_started"] == 0
    chain = ("pod_scheduled", "containers_running", "runner_registered", "job_started")
    assert sum(seen[s] for s in chain) == pytest.approx(0.6)  # pod created -> job named


def test_a_runner_whose_pod_is_made_again_counts_as_unfinished() -> None:
    """Its first pod failed (terminated), the runner makes a new one: no room for a waiting
    runner opens, so a later runner starts at its own request."""
    clock = Clock()
    starts: list[float] = []

    def record(seconds: float, attrs: dict[str, str]) -> None:
        if attrs["stage"] == "runner_created":
            starts.append(clock.now - seconds)

    stages = StageClock(record, clock)
    stages.observe_object("EphemeralRunnerSet", _ers(1, replicas=1))
    stages.runner_created(_er("a", 1), "u", {}, "set")
    stages.pod_created("ns", "a")
    pod = _pod(node=True, state="terminated")
    pod["metadata"] = {
        "name": "a",
        "namespace": "ns",
        "labels": {"actions-ephemeral-runner": "True"},
    }
    clock.now += 1.0
    stages.observe_object("Pod", pod)
    stages.pod_created("ns", "a")
    clock.now += 1.0
    stages.observe_object("EphemeralRunnerSet", _ers(2, replicas=1))
    clock.now += 1.0
    stages.observe_object("EphemeralRunnerSet", _ers(3, replicas=1))
    clock.now += 1.0
    stages.runner_created(_er("b", 3), "u", {}, "set")  # not waited for: its own request
    assert starts == pytest.approx([1000.0, 1003.0])
