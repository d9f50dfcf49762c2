"""EphemeralRunnerSet scaling with patchID semantics; runners get JIT Secrets and pods."""

from __future__ import annotations

import base64
import json

import pytest

from arcflow.common.constants import (
    ANNOTATION_JOB_COMPLETED,
    ANNOTATION_PATCH_ID,
    ENV_JIT_CONFIG,
    FINALIZER_ER,
)
from tests.polling import eventually

from .harness import JIT_PREFIX, Stack, ars_manifest

pytestmark = pytest.mark.integration


async def _scale(stack: Stack, replicas: int, patch_id: int) -> None:
    await stack.kube.patch_merge(
        "EphemeralRunnerSet",
        "solo",
        {"spec": {"replicas": replicas or None, "patchID": patch_id}},
        namespace=stack.namespace,
    )


async def _ready_set(stack: Stack) -> None:
    await stack.register("solo", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "solo"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers)


async def test_replicas_five_patch_zero_creates_runners_with_jit_and_pods(stack: Stack) -> None:
    await _ready_set(stack)
    await _scale(stack, 5, 0)

    async def five_with_pods() -> bool:
        runners = await stack.list("EphemeralRunner")
        pods = [p for p in await stack.list("Pod") if p["metadata"]["name"].startswith("solo-")]
        return len(runners) == 5 and len(pods) == 5

    await eventually(five_with_pods)
    await stack.app.queue.wait_idle()
    runners = await stack.list("EphemeralRunner")
    secrets = {s["metadata"]["name"]: s for s in await stack.list("Secret")}
    for er in runners:
        name = er["metadata"]["name"]
        assert name.startswith("solo-runner-")
        assert FINALIZER_ER in er["metadata"]["finalizers"]
        assert er["metadata"]["annotations"][ANNOTATION_PATCH_ID] == "0"
        assert er["status"]["runnerId"] > 1000
        jit = base64.b64decode(secrets[name]["data"]["jitToken"]).decode()
        assert jit.startswith(JIT_PREFIX)
        pod = await stack.kube.get("Pod", name, stack.namespace)
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env[ENV_JIT_CONFIG]["valueFrom"]["secretKeyRef"]["name"] == name
    assert len(stack.rpc.jit_requests) == 5
    assert {r["scale_set_id"] for r in stack.rpc.jit_requests} == {7}

    ers = await stack.kube.get("EphemeralRunnerSet", "solo", stack.namespace)
    assert ers["status"]["currentReplicas"] == 5
    assert ers["status"]["pendingEphemeralRunners"] == 5

    async def ars_counts() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "solo", stack.namespace)
        return (ars.get("status") or {}).get("currentRunners") == 5

    await eventually(ars_counts)
    # the JIT config never reaches the audit stream
    raw = json.dumps([e.model_dump(mode="json") for e in await stack.audit_events()])
    assert JIT_PREFIX not in raw


async def test_patch_id_semantics(stack: Stack) -> None:
    await _ready_set(stack)
    await _scale(stack, 3, 0)

    async def count(n: int) -> bool:
        return len(await stack.list("EphemeralRunner")) == n

    await eventually(lambda: count(3))
    await stack.app.queue.wait_idle()

    # a non-zero patchID asking for fewer runners never removes idle ones (wait for jobs)
    await _scale(stack, 1, 4)
    await stack.app.queue.wait_idle()
    assert len(await stack.list("EphemeralRunner")) == 3

    # the same patchID again after runners were created for it: nothing happens
    await _scale(stack, 4, 4)
    await stack.app.queue.wait_idle()
    await eventually(lambda: count(4))
    await _scale(stack, 6, 4)  # stale/duplicate: patch 4 already applied
    await stack.app.queue.wait_idle()
    assert len(await stack.list("EphemeralRunner")) == 4

    # patchID 0 forces the state: idle runners are removed from the service, then deleted
    await _scale(stack, 1, 0)
    await eventually(lambda: count(1), within=15)
    # (that they are gone from the service is checked on the real registrar and simulator:
    # test_end_to_end.py, step 2b)
    assert len(stack.rpc.removed) >= 3


async def test_a_runner_whose_job_completed_does_not_count_against_a_new_request(
    stack: Stack,
) -> None:
    """The listener writes a completed job on its runner before its next patch (ADR 0110):
    the still-running runner serves no other job, so a new request for one runner creates one
    (it took the listener's next unchanged-count patch, up to 30 s later, before)."""
    await _ready_set(stack)
    await _scale(stack, 1, 1)

    async def runners() -> list[str]:
        return sorted(r["metadata"]["name"] for r in await stack.list("EphemeralRunner"))

    async def count(n: int) -> list[str] | None:
        names = await runners()
        return names if len(names) == n else None

    [first] = await eventually(lambda: count(1), what="the first runner")
    await stack.set_runner_status(first, {"phase": "Running", "jobId": "job-1"})
    # GitHub completed job-1 and assigned job-2: the listener writes the completion on the
    # runner, then asks for one runner again (a new patchID, the same count).
    now = stack.clock().strftime("%Y-%m-%dT%H:%M:%SZ")  # just now: not a slot held past grace
    await stack.kube.patch_merge(
        "EphemeralRunner",
        first,
        {"metadata": {"annotations": {ANNOTATION_JOB_COMPLETED: now}}},
        namespace=stack.namespace,
    )
    await _scale(stack, 1, 2)
    both = await eventually(lambda: count(2), what="a second runner for the new job")
    assert first in both
