"""One scale set's pump, worker and supervision records, as the listener runs them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.pump import SessionPump
from arcflow.listener.supervisor import Backoff, SupervisorStats, supervise
from arcflow.listener.worker import ScaleSetWorker


@dataclass
class ScaleSetUnit:
    """The pump, worker and supervision records of one scale set."""

    target: ScaleSetTarget
    pump: SessionPump
    worker: ScaleSetWorker
    pump_stats: SupervisorStats = field(default_factory=SupervisorStats)
    worker_stats: SupervisorStats = field(default_factory=SupervisorStats)

    async def _pump(self, stop: asyncio.Event) -> None:
        try:
            await self.pump.run(stop)
        finally:
            self.worker.session_closed()

    async def run_supervised(self, stop: asyncio.Event, backoff: Backoff) -> None:
        """The pump and the worker, each restarted by its own supervisor until ``stop``."""
        label = self.target.label
        await asyncio.gather(
            supervise(
                f"session pump {label}",
                self._pump,
                stop,
                backoff=backoff,
                stats=self.pump_stats,
                progress=self.pump.progress,
            ),
            supervise(
                f"worker {label}",
                self.worker.run,
                stop,
                backoff=backoff,
                stats=self.worker_stats,
            ),
        )
