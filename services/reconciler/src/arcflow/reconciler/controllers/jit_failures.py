"""A runner whose JIT config the registrar cannot get: retried on a steady beat, and said once
a minute per variant in a Warning Event on its EphemeralRunnerSet (``kubectl describe ers``).

The registrar answers a failing scale set's requests at once while one probe is in flight
(ADR 0044), so a retry every few seconds costs a fast refusal; after the fault clears, the
next retry of each runner gets its config. The exponential back-off of the work queue would
leave runners waiting up to a minute after the outage.
"""

from __future__ import annotations

import time
from typing import Any

from arcflow.common.constants import KIND_ERS
from arcflow.common.kube import build_event
from arcflow.common.models import EphemeralRunner
from arcflow.common.rpc.registrar import RegistrarRpcError
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.manifest import meta

#: How soon a runner asks again after its JIT request failed upstream.
JIT_RETRY_SECONDS = 3.0
#: At most one Event per EphemeralRunnerSet in this many seconds.
EVENT_INTERVAL_SECONDS = 60.0
REASON_JIT_FAILING = "RunnerRegistrationFailing"


def _owner_set(er: EphemeralRunner) -> dict[str, Any] | None:
    """The runner's EphemeralRunnerSet as an Event's involved object (from the owner ref)."""
    for ref in er.metadata.owner_references or []:
        if ref.kind == KIND_ERS and ref.controller:
            return {
                "apiVersion": ref.api_version,
                "kind": KIND_ERS,
                "metadata": {"name": ref.name, "namespace": er.namespace, "uid": ref.uid},
            }
    return None


async def report_jit_failure(
    ctx: Context, er: EphemeralRunner, scope: Scope, scale_set_id: int, error: RegistrarRpcError
) -> float:
    """Say why the runner has no JIT config (rate-limited); the seconds to retry after."""
    involved = _owner_set(er) or er.manifest
    key = f"{meta(involved).get('namespace')}/{meta(involved).get('name')}"
    now = time.monotonic()
    last = ctx.runner_set_state.jit_failures_reported.get(key)
    if last is None or now - last >= EVENT_INTERVAL_SECONDS:
        ctx.runner_set_state.jit_failures_reported[key] = now
        message = (
            f"no JIT config for runners of scale set {scale_set_id}: {error.code.value}: "
            f"{error.reason}; each runner asks again every {JIT_RETRY_SECONDS:g} s"
        )
        event = build_event(
            involved, REASON_JIT_FAILING, message, type="Warning", component="arcflow-reconciler"
        )
        created = await ctx.kube.create(event)
        await ctx.writer.audit("created", created, scope, "Kubernetes Event about JIT failures")
    return JIT_RETRY_SECONDS
