"""A 403 while the process stops is taken as done (the listener's RBAC is going away)."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("arcflow.listener.writes")


class StopRefusals:
    """Excuses a refused write (403) once ``stopping`` is set, counts it and says so once.

    While the process stops, its Role or RoleBinding is being deleted with its
    AutoscalingListener, so a refused write is treated like a NotFound: one info line, no
    retry. Any other 403 stays an error. One per scale set, shared by its two writers."""

    def __init__(self, label: str, stopping: asyncio.Event | None = None) -> None:
        self._label = label
        self._stopping = stopping
        #: Writes refused while stopping and taken as done.
        self.count = 0

    def excused(self) -> bool:
        if self._stopping is None or not self._stopping.is_set():
            return False
        self.count += 1
        if self.count == 1:
            log.info(
                "%s: Kubernetes write refused (403) while stopping: the listener's access "
                "is being removed; further writes are skipped",
                self._label,
            )
        return True
