"""One scale set's pump, worker and supervision records, as the listener runs them."""

from __future__ import annotations

from dataclasses import dataclass, field

from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.pump import SessionPump
from arcflow.listener.supervisor import SupervisorStats
from arcflow.listener.worker import ScaleSetWorker


@dataclass
class ScaleSetUnit:
    """The pump, worker and supervision records of one scale set."""

    target: ScaleSetTarget
    pump: SessionPump
    worker: ScaleSetWorker
    pump_stats: SupervisorStats = field(default_factory=SupervisorStats)
    worker_stats: SupervisorStats = field(default_factory=SupervisorStats)
