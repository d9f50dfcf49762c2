"""Which controller reconciles which key kind: each behind the typed adapter (ADR 0050)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from arcflow.common.models import (
    AutoscalingListener,
    AutoscalingRunnerSet,
    EphemeralRunner,
    EphemeralRunnerSet,
)
from arcflow.reconciler.controllers.adapter import TypedReconciler
from arcflow.reconciler.controllers.ars import reconcile_ars
from arcflow.reconciler.controllers.ars_spec import ars_unparsable
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.listener import reconcile_listener
from arcflow.reconciler.controllers.runner import reconcile_runner
from arcflow.reconciler.controllers.runner_set import reconcile_runner_set
from arcflow.reconciler.keys import Key, Kind, Result

CONTROLLERS: dict[Kind, Callable[[Context, Key], Awaitable[Result]]] = {
    "ars": TypedReconciler(
        AUTOSCALING_RUNNER_SET, AutoscalingRunnerSet, reconcile_ars, on_unparsable=ars_unparsable
    ),
    "al": TypedReconciler(AUTOSCALING_LISTENER, AutoscalingListener, reconcile_listener),
    "ers": TypedReconciler(EPHEMERAL_RUNNER_SET, EphemeralRunnerSet, reconcile_runner_set),
    "er": TypedReconciler(EPHEMERAL_RUNNER, EphemeralRunner, reconcile_runner),
}
