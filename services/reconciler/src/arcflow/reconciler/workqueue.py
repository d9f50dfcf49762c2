"""The reconciler's work queue: the common one (:mod:`arcflow.common.reconcile.workqueue`)
taking keys by kind.

Waiting keys are taken by kind, then in the order they came: listeners first, then
AutoscalingRunnerSets, then runner sets, then single runners. A burst queues hundreds of runner
keys; a listener pod that died meanwhile must not wait behind them, since no job is scaled for
until it is back (docs/reconciler.md). Listeners go ahead of ARSs too: 100 ARSs applied at once
re-queue their ARS keys at every change of their runner sets, and a listener key behind them
waited up to a minute before its pod was made (ADR 0040).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from arcflow.common.reconcile import workqueue as _workqueue
from arcflow.common.reconcile.workqueue import backoff_delay
from arcflow.reconciler.keys import PRIORITY, Key, Result

Reconcile = Callable[[Key], Awaitable[Result]]


class WorkQueue(_workqueue.WorkQueue[Key]):
    """The common work queue with the reconciler's kind priorities."""

    def __init__(self, reconcile: Reconcile, **options: Any) -> None:
        options.setdefault("priorities", PRIORITY)
        super().__init__(reconcile, **options)


__all__ = ["Reconcile", "WorkQueue", "backoff_delay"]
