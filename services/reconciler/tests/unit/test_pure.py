"""Pure pieces: backoff, patch computation, patchID rule, event routing, the work queue."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from arcflow.common.events import EventKeys, K8sObjectChanged, OwnerRef, ScaleSetAssigned
from arcflow.common.kube import InvalidError
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.reconciler.assignments import ScaleSetAssignment, parse_record
from arcflow.reconciler.controllers.manifest import merge_patch_to
from arcflow.reconciler.controllers.runner_rules import backoff_remaining
from arcflow.reconciler.controllers.runner_set_rules import latest_patch_id, should_scale
from arcflow.reconciler.keys import Key, Result
from arcflow.reconciler.routing import keys_for
from arcflow.reconciler.workqueue import WorkQueue, backoff_delay


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_delay(n, 0.5, 3.0) for n in range(5)] == [0.0, 0.5, 1.0, 2.0, 3.0]


def test_merge_patch_to_nulls_removed_keys() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"a": 1, "b": {"c": 5}, "e": [2], "f": True}
    assert merge_patch_to(old, new) == {"b": {"c": 5, "d": None}, "e": [2], "f": True}


def test_patch_id_rule() -> None:
    runners = [{"metadata": {"annotations": {"actions.github.com/patch-id": v}}} for v in "372"]
    assert latest_patch_id(runners) == 7
    assert should_scale(0, 7)
    assert should_scale(8, 7)
    assert not should_scale(7, 7)


def test_failure_backoff() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert backoff_remaining({}, now) == 0
    assert backoff_remaining({"u1": "2026-01-01T00:00:08Z"}, now) == 3.0  # 5 s after 1 failure


def test_kv_record_maps_to_assignment() -> None:
    record = ScaleSetRecord(
        namespace="arc",
        ars="big",
        variant="gpu",
        scale_set_id=5,
        scale_set_name="big-gpu",
        runner_group_name="Default",
        github_config_url="https://github.com/acme",
        github_config_secret="creds",
    )
    assert parse_record("gpu", record.encode()) == ScaleSetAssignment(
        variant="gpu", scale_set_id=5, scale_set_name="big-gpu", runner_group_name="Default"
    )
    assert parse_record("gpu", b'{"scale_set_id": 5, "scale_set_name": "x"}') is None
    zero_id = {**json.loads(record.encode()), "scale_set_id": 0}
    assert parse_record("gpu", json.dumps(zero_id).encode()) is None
    assert parse_record("gpu", b"not json") is None


def test_routing() -> None:
    pod = K8sObjectChanged(
        source="w",
        api_version="v1",
        kind="Pod",
        resource="pods",
        namespace="arc",
        name="big-runner-abc",
        uid="u",
        change="MODIFIED",
        resource_version="1",
        owner_references=[
            OwnerRef(api_version="x", kind="EphemeralRunner", name="big-runner-abc", uid="o")
        ],
    )
    assert keys_for(pod, "ctl") == [Key("er", "arc", "big-runner-abc")]
    ers = pod.model_copy(
        update={
            "resource": "ephemeralrunnersets",
            "name": "big-gpu",
            "owner_references": [],
            "labels": {
                "actions.github.com/scale-set-name": "big",
                "actions.github.com/scale-set-namespace": "arc",
            },
        }
    )
    assert keys_for(ers, "ctl") == [Key("ers", "arc", "big-gpu"), Key("ars", "arc", "big")]
    assigned = ScaleSetAssigned(
        source="registrar",
        keys=EventKeys(namespace="arc", ars="big", variant="gpu"),
        variant="gpu",
        scale_set_id=3,
        scale_set_name="big-gpu",
        runner_group_id=1,
        runner_group_name="Default",
    )
    assert keys_for(assigned, "ctl") == [Key("ars", "arc", "big")]


async def test_work_queue_serialises_per_key_and_retries() -> None:
    running: set[Key] = set()
    overlaps = 0
    calls: dict[Key, int] = {}
    a = Key("ars", "ns", "a")
    first_run_of_a = asyncio.Event()
    release_a = asyncio.Event()

    async def reconcile(key: Key) -> Result:
        nonlocal overlaps
        if key in running:
            overlaps += 1
        running.add(key)
        calls[key] = calls.get(key, 0) + 1
        if key == a and calls[key] == 1:
            first_run_of_a.set()
            await release_a.wait()  # in flight while the same key is added again
        await asyncio.sleep(0)
        running.discard(key)
        if key.name == "flaky" and calls[key] < 3:
            raise RuntimeError("boom")
        return Result.done()

    queue = WorkQueue(reconcile, workers=4, retry_base_seconds=0.01, retry_cap_seconds=0.02)
    queue.start()
    try:
        queue.add(a)
        await asyncio.wait_for(first_run_of_a.wait(), 5)
        for _ in range(4):
            queue.add(a)
        queue.add(Key("ars", "ns", "flaky"))
        release_a.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert overlaps == 0
    assert calls[a] == 2  # four adds while in flight coalesce into one more run
    assert calls[Key("ars", "ns", "flaky")] == 3


async def test_work_queue_takes_listeners_before_a_backlog_of_runners() -> None:
    order: list[Key] = []
    release = asyncio.Event()

    async def reconcile(key: Key) -> Result:
        order.append(key)
        if len(order) == 1:
            await release.wait()  # the one worker is busy while the backlog builds up
        return Result.done()

    queue = WorkQueue(reconcile, workers=1)
    queue.start()
    try:
        runners = [Key("er", "ns", f"runner-{i}") for i in range(5)]
        queue.add(runners[0])
        await asyncio.sleep(0)
        backlog = [*runners[1:], Key("ers", "ns", "set"), Key("ars", "ns", "a")]
        for key in [*backlog, Key("al", "ns", "listener")]:
            queue.add(key)
        release.set()
        await queue.wait_idle(5)
    finally:
        await queue.stop()
    assert order == [
        runners[0],
        Key("al", "ns", "listener"),
        Key("ars", "ns", "a"),
        Key("ers", "ns", "set"),
        *runners[1:],
    ]


async def test_work_queue_drops_a_terminal_error_until_the_next_add() -> None:
    calls: dict[str, int] = {}

    async def reconcile(key: Key) -> Result:
        calls[key.name] = calls.get(key.name, 0) + 1
        if key.name == "invalid":
            raise InvalidError("spec.replicas: must be >= 0", status=422)
        raise RuntimeError("try again")

    queue = WorkQueue(reconcile, workers=2, retry_base_seconds=0.01, retry_cap_seconds=0.01)
    queue.start()
    try:
        queue.add(Key("ers", "ns", "invalid"))
        queue.add(Key("ers", "ns", "flaky"))
        await asyncio.sleep(0.3)
        assert calls["invalid"] == 1  # terminal: not retried
        assert calls["flaky"] > 3  # retryable: retried with backoff
        queue.add(Key("ers", "ns", "invalid"))  # a new event runs it again
        await asyncio.sleep(0.05)
        assert calls["invalid"] == 2
    finally:
        await queue.stop()
