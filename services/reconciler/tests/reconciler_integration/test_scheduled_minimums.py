"""Scheduled minimums in the reconciler (ADR 0063): ``status.effectiveMinRunners`` follows a
window opening and closing (the reconciler looks again at each boundary, nothing else has to
change), the listener's config carries the overrides, and a bad override that got past the
CRD gets a False condition and a Warning Event and no child object."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest

from arcflow.common.constants import ANNOTATION_LISTENER_SCHEDULED_OVERRIDES
from arcflow.common.schedules import format_time, utc_now
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.polling import eventually

from .harness import Stack, ars_manifest, runner_template

pytestmark = pytest.mark.integration


async def _status(stack: Stack, name: str) -> dict[str, Any]:
    ars = await stack.kube.get("AutoscalingRunnerSet", name, stack.namespace)
    return dict(ars.get("status") or {})


def _minimums(status: dict[str, Any]) -> dict[str, int]:
    return {e["variant"]: e["minRunners"] for e in status.get("effectiveMinRunners") or []}


async def test_status_follows_a_window_and_the_listener_config_carries_it(stack: Stack) -> None:
    opens = utc_now() + timedelta(seconds=4)
    closes = opens + timedelta(seconds=6)
    doc = ars_manifest(
        stack.namespace,
        "sched",
        minRunners=1,
        runnerVariants=[
            {"name": "cpu"},
            {"name": "gpu", "template": runner_template("gpu:1"), "minRunners": 0},
        ],
        scheduledOverrides=[
            {
                "startTime": format_time(opens + timedelta(seconds=1)),
                "endTime": format_time(closes + timedelta(seconds=1)),
                "minRunners": 3,
                "variants": ["cpu"],
            }
        ],
    )
    doc["spec"].pop("template")
    doc["spec"]["template"] = runner_template("cpu:1")
    await stack.register("sched", "cpu", 21)
    await stack.register("sched", "gpu", 22)
    await stack.apply_ars(doc)

    async def before() -> dict[str, Any] | None:
        status = await _status(stack, "sched")
        return status if _minimums(status) == {"cpu": 1, "gpu": 0} else None

    status = await eventually(before)
    [cpu, gpu] = status["effectiveMinRunners"]
    assert "override" not in cpu
    assert cpu["nextChange"] == format_time(opens + timedelta(seconds=1))
    assert "nextChange" not in gpu  # no override applies to gpu

    async def during() -> dict[str, Any] | None:
        status = await _status(stack, "sched")
        return status if _minimums(status).get("cpu") == 3 else None

    status = await eventually(during, within=15)
    assert utc_now() >= opens
    assert status["effectiveMinRunners"][0]["override"] == "spec.scheduledOverrides[0]"

    async def after() -> dict[str, Any] | None:
        status = await _status(stack, "sched")
        return status if _minimums(status) == {"cpu": 1, "gpu": 0} else None

    status = await eventually(after, within=20)
    assert utc_now() >= closes
    assert "nextChange" not in status["effectiveMinRunners"][0]  # a one-off window: done

    [listener] = await stack.list("AutoscalingListener", stack.controller_namespace)
    carried = json.loads(
        listener["metadata"]["annotations"][ANNOTATION_LISTENER_SCHEDULED_OVERRIDES]
    )
    assert list(carried) == ["cpu"]
    [secret] = [
        s
        for s in await stack.list("Secret", stack.controller_namespace)
        if s["metadata"]["name"].endswith("-config")
    ]
    config = json.loads(base64.b64decode(secret["data"]["config.json"]))
    by_ers = {e["ephemeral_runner_set_name"]: e for e in config["scale_sets"]}
    assert by_ers["sched-cpu"]["scheduled_overrides"][0]["minRunners"] == 3
    assert "scheduled_overrides" not in by_ers["sched-gpu"]


async def test_a_bad_override_past_the_crd_is_refused_with_a_condition_and_an_event(
    kube_emulator: KubeEmulator, stack: Stack
) -> None:
    """On the emulator: a real server's CRD refuses these overrides before any controller
    sees them (tests/conformance/test_crd_validation.py); the emulator stores them, as a server
    keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    doc = ars_manifest(
        stack.namespace,
        "badsched",
        runnerVariants=[{"name": "cpu"}],
        scheduledOverrides=[
            {
                "startTime": "2026-01-05T17:00:00+02:00",
                "endTime": "2026-01-05T09:00:00+02:00",
                "minRunners": 2,
                "recurrenceRule": {"frequency": "Hourly"},
                "variants": ["nope"],
            }
        ],
    )
    await stack.register("badsched", "cpu", 31)
    await stack.apply_ars(doc)
    # A valid neighbour in the same namespace is reconciled as usual: nothing else breaks.
    good = ars_manifest(stack.namespace, "goodsched", runnerVariants=[{"name": "cpu"}])
    await stack.register("goodsched", "cpu", 32)
    await stack.apply_ars(good)

    async def invalid() -> dict[str, Any] | None:
        conditions = (await _status(stack, "badsched")).get("conditions") or []
        found = next((c for c in conditions if c["type"] == "SpecValid"), None)
        return found if found and found["status"] == "False" else None

    condition = await eventually(invalid)
    for text in (
        "spec.scheduledOverrides[0].endTime: is not after startTime",
        "spec.scheduledOverrides[0].recurrenceRule.frequency: 'Hourly' is not a frequency",
        "spec.scheduledOverrides[0].variants[0]: 'nope' is not a runner variant",
    ):
        assert text in condition["message"]
    [warning] = await eventually(lambda: stack.events("InvalidSpec", "badsched"))
    assert warning["type"] == "Warning"
    await stack.wait_idle()

    async def children() -> tuple[list[str], list[str]] | None:
        sets = [d["metadata"]["name"] for d in await stack.list("EphemeralRunnerSet")]
        listeners = await stack.list("AutoscalingListener", stack.controller_namespace)
        owners = [d["spec"]["autoscalingRunnerSetName"] for d in listeners]
        return (sets, owners) if sets and owners else None

    assert await eventually(children) == (["goodsched-cpu"], ["goodsched"])
