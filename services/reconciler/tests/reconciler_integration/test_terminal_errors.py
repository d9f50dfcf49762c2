"""Retryability travels on the exception type (ADR 0050): an object that does not parse is a
terminal error (a Warning Event or the ARS's SpecValid condition says why, and the key waits
for the next change instead of being retried), while an API server error is retried until it
goes away. Passes are counted with the reconciler's own metrics."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.constants import FINALIZER_ER
from arcflow.devstack.kube_emulator import KubeEmulator
from tests.polling import eventually, settled

from .harness import SECRET_NAME, Stack, ars_manifest, metric_total

pytestmark = pytest.mark.integration


def _passes(reader: InMemoryMetricReader, kind: str) -> int:
    return metric_total(reader, "arcflow_reconciler_reconciles", kind=kind)


def _runner(namespace: str, name: str, scale_set_id: Any) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "githubConfigUrl": "https://github.com/acme",
            "githubConfigSecret": SECRET_NAME,
            "runnerScaleSetId": scale_set_id,
            "spec": {"containers": [{"name": "runner", "image": "runner:1"}]},
        },
    }


async def test_runner_that_does_not_parse_is_reported_and_not_retried(
    kube_emulator: KubeEmulator, counted_stack: Stack, reader: InMemoryMetricReader
) -> None:
    """On the emulator: a real server's CRD schema refuses this object before any controller
    sees it (tests/conformance/test_crd_validation.py shows that); the emulator stores it, as a
    server keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    stack = counted_stack
    await stack.kube.create(_runner(stack.namespace, "broken", "seven-secret-value"))

    warnings = await eventually(lambda: stack.events("InvalidObject", "broken"))
    assert warnings[0]["type"] == "Warning"
    assert "spec.runnerScaleSetId" in warnings[0]["message"]
    assert "seven-secret-value" not in warnings[0]["message"]  # paths, never values

    # No hot retry: with a 0.05 s base and a 0.5 s cap, a retried key would pass several
    # times a second; a terminal one is not looked at again until it changes.
    passes = await settled(lambda: _passes(reader, "er"), quiet=1.5)
    assert 1 <= passes <= 2, passes
    assert metric_total(reader, "arcflow_reconciler_errors", kind="er") == passes
    assert len(await stack.events("InvalidObject", "broken")) == 1
    runner = await stack.kube.get("EphemeralRunner", "broken", stack.namespace)
    assert not runner["metadata"].get("finalizers")  # nothing was written to it

    # The change brings the key back: the fixed runner is reconciled.
    await stack.kube.patch_merge(
        "EphemeralRunner", "broken", {"spec": {"runnerScaleSetId": 7}}, namespace=stack.namespace
    )

    async def finalized() -> bool:
        fixed = await stack.kube.get("EphemeralRunner", "broken", stack.namespace)
        return FINALIZER_ER in (fixed["metadata"].get("finalizers") or [])

    await eventually(finalized)


async def test_api_server_error_is_retried(
    counted_stack: Stack, reader: InMemoryMetricReader, kube_emulator: KubeEmulator
) -> None:
    stack = counted_stack
    refusal = kube_emulator.inject_error(
        verb="patch",
        resource="ephemeralrunners",
        namespace=stack.namespace,
        name_prefix="flaky",
        status=500,
        reason="InternalError",
        message="etcd leader changed",
        times=2,
    )
    await stack.kube.create(_runner(stack.namespace, "flaky", 7))

    async def finalized() -> bool:
        runner = await stack.kube.get("EphemeralRunner", "flaky", stack.namespace)
        return FINALIZER_ER in (runner["metadata"].get("finalizers") or [])

    await eventually(finalized)
    assert refusal.hits == 2
    assert metric_total(reader, "arcflow_reconciler_errors", kind="er") >= 2


async def test_ars_that_does_not_parse_gets_the_spec_condition(
    kube_emulator: KubeEmulator, counted_stack: Stack, reader: InMemoryMetricReader
) -> None:
    """On the emulator: a real server's CRD schema refuses this object before any controller
    sees it (tests/conformance/test_crd_validation.py shows that); the emulator stores it, as a
    server keeps an object stored under an older, laxer CRD, so arcflow's own refusal shows."""
    stack = counted_stack
    doc = ars_manifest(stack.namespace, "typo", minRunners="2")
    await stack.register("typo", "", 7)
    await stack.apply_ars(doc)

    async def invalid() -> dict[str, Any] | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "typo", stack.namespace)
        conditions = (ars.get("status") or {}).get("conditions") or []
        found = next((c for c in conditions if c["type"] == "SpecValid"), None)
        return found if found and found["status"] == "False" else None

    condition = await eventually(invalid)
    assert "spec.minRunners" in condition["message"]
    assert await stack.events("InvalidSpec", "typo")
    await stack.wait_idle()
    assert await stack.list("EphemeralRunnerSet") == []
    # Every pass ended terminal, and none was a retry (a few passes: the apply, the cache's
    # echoes of the ARS and of its status write).
    passes = await settled(lambda: _passes(reader, "ars"), quiet=1.5)
    assert passes <= 4, passes
    assert metric_total(reader, "arcflow_reconciler_errors", kind="ars") == passes
