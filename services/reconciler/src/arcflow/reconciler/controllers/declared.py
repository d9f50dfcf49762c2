"""The reconciler's controllers, declared (ADR 0095): what each reconciles, what it owns, what
else wakes it and the state it keeps. The controller runtime
(:mod:`arcflow.common.reconcile.manager`) builds the cache's routing, the work queue and the
typed adapters from this, and docs/events.md shows it.

Waiting keys are taken by kind: listeners first, then AutoscalingRunnerSets, then runner sets,
then single runners. A burst queues hundreds of runner keys; a listener pod that died meanwhile
must not wait behind them, since no job is scaled for until it is back (docs/reconciler.md).
Listeners go ahead of ARSs too: 100 ARSs applied at once re-queue their ARS keys at every
change of their runner sets, and a listener key behind them waited up to a minute (ADR 0040).
"""

from __future__ import annotations

from arcflow.common.constants import KIND_AL, KIND_ER, KIND_ERS
from arcflow.common.events import (
    RegistrationFailed,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SessionFailed,
    SessionOpened,
)
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
from arcflow.common.reconcile.declare import Controller, Controllers, OnEvent, Watch
from arcflow.reconciler.controllers.adapter import UnparsableReports, read_primary, warn_unparsable
from arcflow.reconciler.controllers.ars import reconcile_ars
from arcflow.reconciler.controllers.ars_plan import ArsPlans
from arcflow.reconciler.controllers.ars_spec import ars_unparsable
from arcflow.reconciler.controllers.base import ArsState, RunnerSetState, StatusPacer
from arcflow.reconciler.controllers.listener import reconcile_listener
from arcflow.reconciler.controllers.runner import reconcile_runner
from arcflow.reconciler.controllers.runner_removals import RunnerRemovals
from arcflow.reconciler.controllers.runner_set import reconcile_runner_set
from arcflow.reconciler.keys import PRIORITY
from arcflow.reconciler.routing import (
    ars_of_event,
    ars_of_labels,
    listener_of_rbac,
    registration_group,
    session_group,
    sets_using_quota,
)
from arcflow.reconciler.stages import StageClock

KIND_POD, KIND_SECRET, KIND_SERVICE_ACCOUNT = "Pod", "Secret", "ServiceAccount"
KIND_ROLE, KIND_ROLE_BINDING, KIND_RESOURCE_QUOTA = "Role", "RoleBinding", "ResourceQuota"

_BY_LABELS = "its scale-set labels name the ARS"

#: A runner set's pass reads all its runners; a runner's change asks nothing of it at once (the
#: runner's own controller releases it, counts are paced, capacity looks again every 0.5 s), so
#: a burst's runner changes wake their set once per this long (ADR 0117).
RUNNER_SET_SETTLE_SECONDS = 0.5

#: An ARS pass reads all its runner sets and writes what they add up to (its status and
#: capacity report, a missing set made again); one set's change asks nothing of it at once
#: (the shared budget is kept by the runner sets' own passes). With 88 variants a burst changes
#: its sets hundreds of times, and each change woke the one ARS, whose pass is 88 variants' work
#: and ran ahead of every runner key: they now wake it once per this long (ADR 0123).
ARS_SETTLE_SECONDS = 1.0

ARS = Controller(
    "ars",
    AUTOSCALING_RUNNER_SET,
    AutoscalingRunnerSet.from_observed,
    reconcile_ars,
    watches=(
        Watch(KIND_ERS, ars_of_labels, _BY_LABELS, settle_seconds=ARS_SETTLE_SECONDS),
        Watch(KIND_AL, ars_of_labels, _BY_LABELS),
        Watch(KIND_RESOURCE_QUOTA, sets_using_quota, "the sets of its namespace it budgets"),
    ),
    events=(
        OnEvent((ScaleSetAssigned, ScaleSetDeleted), ars_of_event),
        OnEvent((RegistrationFailed,), ars_of_event, keep=registration_group),
        OnEvent((SessionFailed, SessionOpened), ars_of_event, keep=session_group),
    ),
    state=(ArsState, StatusPacer, ArsPlans),
    priority=PRIORITY["ars"],
    on_unparsable=ars_unparsable,
)

LISTENER = Controller(
    "al",
    AUTOSCALING_LISTENER,
    AutoscalingListener.from_observed,
    reconcile_listener,
    owns=(KIND_POD, KIND_SECRET, KIND_SERVICE_ACCOUNT),
    watches=tuple(
        Watch(kind, listener_of_rbac, "its listener labels name the listener")
        for kind in (KIND_SERVICE_ACCOUNT, KIND_ROLE, KIND_ROLE_BINDING)
    ),
    priority=PRIORITY["al"],
)

RUNNER_SET = Controller(
    "ers",
    EPHEMERAL_RUNNER_SET,
    EphemeralRunnerSet.from_observed,
    reconcile_runner_set,
    owns=(KIND_ER, KIND_SECRET),
    owned_settle_seconds=RUNNER_SET_SETTLE_SECONDS,
    state=(RunnerSetState, StatusPacer, StageClock),
    priority=PRIORITY["ers"],
)

RUNNER = Controller(
    "er",
    EPHEMERAL_RUNNER,
    EphemeralRunner.from_observed,
    reconcile_runner,
    owns=(KIND_POD, KIND_SECRET),
    # The runner reads its set's refusal memo (pod_refusals) and the ARS's deadlines memo;
    # its removal calls run off the pass (ADR 0101).
    state=(RunnerSetState, ArsState, StageClock, RunnerRemovals),
    priority=PRIORITY["er"],
)

DECLARED = Controllers(
    (ARS, LISTENER, RUNNER_SET, RUNNER),
    read=read_primary,
    on_unparsable=warn_unparsable,
    state=(UnparsableReports,),
)
