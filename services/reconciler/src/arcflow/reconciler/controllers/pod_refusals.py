"""A runner pod the API server refused, said where people look (issue 33, ADR 0084).

Whatever the decision (``runner_rules.pod_create_decision``: retried, requeued for quota,
marked ``InvalidPod``), the API server's own message goes into a Warning Event
``RunnerPodRefused`` on the EphemeralRunner (once per runner and message) and on its
AutoscalingRunnerSet (at most once a minute per variant, and at once again after a pod of the
variant was created). ``arcflow doctor`` reads the runner Events for its finding. The message
is passed through the secret redaction first: an admission message can quote a field value.
"""

from __future__ import annotations

import time

from arcflow.common.kube import AUTOSCALING_RUNNER_SET
from arcflow.common.models import EphemeralRunner
from arcflow.common.telemetry.redaction import redact_text
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, read_observed, warn

REASON_POD_REFUSED = "RunnerPodRefused"
#: At most one Event per set and variant in this many seconds while its pods are refused.
ARS_EVENT_INTERVAL_SECONDS = 60.0
#: Longest API server message kept in an Event.
MAX_MESSAGE = 500


def refusal_message(pod: str, api_message: str) -> str:
    """The Event text: the pod and the API server's message (redacted, bounded)."""
    return f"pod {pod} refused by the API server: {redact_text(api_message)[:MAX_MESSAGE]}"


async def report_pod_refused(
    ctx: Context, er: EphemeralRunner, scope: Scope, api_message: str
) -> None:
    state = ctx.runner_set_state
    message = refusal_message(er.name, api_message)
    runner_key = (er.namespace, er.name)
    if state.pod_refusals_reported.get(runner_key) != message:
        state.pod_refusals_reported[runner_key] = message
        await warn(ctx, er.manifest, REASON_POD_REFUSED, message, scope, "Event: pod refused")
    set_key = (scope.namespace, scope.ars, scope.variant)
    now = time.monotonic()
    last = state.set_refusals_reported.get(set_key)
    if last is not None and now - last < ARS_EVENT_INTERVAL_SECONDS:
        return
    ars = await read_observed(ctx, AUTOSCALING_RUNNER_SET, scope.ars, scope.namespace)
    if ars is None:
        return
    state.set_refusals_reported[set_key] = now
    variant = f"variant {scope.variant}" if scope.variant else "the default variant"
    said = f"{variant}: {message}"
    await warn(ctx, ars, REASON_POD_REFUSED, said, scope, "Event: runner pods refused")


def pod_created(ctx: Context, er: EphemeralRunner, scope: Scope) -> None:
    """A pod of the runner was created: a later refusal is news again."""
    state = ctx.runner_set_state
    state.pod_refusals_reported.pop((er.namespace, er.name), None)
    state.set_refusals_reported.pop((scope.namespace, scope.ars, scope.variant), None)


__all__ = ["REASON_POD_REFUSED", "pod_created", "refusal_message", "report_pod_refused"]
