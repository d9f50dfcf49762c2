"""Releasing the last finalizer of a deleting EphemeralRunner ends its life in the cache.

A real API server answers the PATCH that removes the last finalizer with the object at the
version the cache already held, so the cache kept the deleting runner, finalizers and all,
until the DELETED event: any pass in between deregistered it a second time and sent a PATCH
that got 404. The runner part of the cache lags here by a second, so the watch echo of the
delete re-queues each runner after its release (what a busy burst does by chance)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.polling import eventually, settled

from .harness import Stack, ars_manifest, metric_total

pytestmark = pytest.mark.integration

RUNNERS = 4


async def test_a_released_runner_is_patched_once(
    counted_stack: Stack, reader: InMemoryMetricReader
) -> None:
    stack = counted_stack
    await stack.register("rel", "", 7)
    await stack.apply_ars(ars_manifest(stack.namespace, "rel"))

    async def has_ers() -> bool:
        return bool(await stack.list("EphemeralRunnerSet"))

    await eventually(has_ers, what="the runner set")
    await stack.scale("rel", RUNNERS, 1)

    async def registered() -> list[dict[str, Any]] | None:
        runners = await stack.list("EphemeralRunner")
        ok = len(runners) == RUNNERS and all(
            (r.get("status") or {}).get("runnerId") for r in runners
        )
        return runners if ok else None

    runners = await eventually(registered, what=f"{RUNNERS} registered runners")
    await stack.wait_idle()
    names = {r["metadata"]["name"] for r in runners}
    for informer in stack.app.cache.informers_of("EphemeralRunner"):
        informer.delay_seconds = 1.0
    errors_before = metric_total(reader, "arcflow_reconciler_errors", kind="er")
    released_before = metric_total(
        reader, "arcflow_reconciler_writes", action="patched", kind="EphemeralRunner"
    )
    await stack.kube.delete("EphemeralRunnerSet", "rel", namespace=stack.namespace)

    async def gone() -> bool:
        left = {r["metadata"]["name"] for r in await stack.list("EphemeralRunner")}
        assert not left & names, f"runners still there: {sorted(left & names)}"
        return True

    await eventually(gone, within=20, what="every runner deleted")
    # Each runner removed from the service once, with the same lag, is checked on the real
    # registrar and simulator (test_end_to_end.py, step 3).
    await settled(
        lambda: metric_total(
            reader, "arcflow_reconciler_writes", action="patched", kind="EphemeralRunner"
        ),
        quiet=2.0,
        within=20,
    )
    for name in names:
        assert stack.app.cache.get("EphemeralRunner", name, stack.namespace) is None, name
    assert metric_total(reader, "arcflow_reconciler_errors", kind="er") == errors_before, (
        "a runner pass failed (a PATCH of a released runner got 404)"
    )
    # One finalizer release per runner, nothing more.
    patched = metric_total(
        reader, "arcflow_reconciler_writes", action="patched", kind="EphemeralRunner"
    )
    assert patched - released_before == RUNNERS
