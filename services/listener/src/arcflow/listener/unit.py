"""One scale set's pump, decision and supervision record, as the listener runs them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import ScaleDecider
from arcflow.listener.pump import SessionPump
from arcflow.listener.supervisor import Backoff, SupervisorStats, supervise


@dataclass
class ScaleSetUnit:
    """The pump of one scale set, the decision it feeds, and its supervision record."""

    target: ScaleSetTarget
    pump: SessionPump
    decider: ScaleDecider
    pump_stats: SupervisorStats = field(default_factory=SupervisorStats)

    async def run_supervised(self, stop: asyncio.Event, backoff: Backoff) -> None:
        """The pump (and with it every decision), restarted by its supervisor until ``stop``."""
        await supervise(
            f"session pump {self.target.label}",
            self.pump.run,
            stop,
            backoff=backoff,
            stats=self.pump_stats,
            progress=self.pump.progress,
        )
