"""A :class:`~arcflow.common.service.spec.Component` around a loop that runs until stopped.

Some services are not a set of handlers but long-running loops of their own (the listener's
session pumps, workers and lease contest, ADR 0070). ``Loop("scale sets", run, ctx.fatal)``
starts ``run(stop)`` as a task when the runtime starts its components; the runtime's stop sets
``stop`` and waits for the loop to finish its own shutdown (the listener deletes its sessions
then). A loop that ends before it was asked to, with an error or without, hands the runtime
that failure through ``on_end`` (``ctx.fatal``: exit code 1 under ``main``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class LoopEndedError(RuntimeError):
    """A loop that must run until stopped returned on its own."""


class Loop:
    """``run(stop)`` as a task between the runtime's start and stop."""

    def __init__(
        self,
        name: str,
        run: Callable[[asyncio.Event], Awaitable[None]],
        on_end: Callable[[BaseException], None],
    ) -> None:
        self.name = name
        self._run = run
        self._on_end = on_end
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._guarded(), name=self.name)

    async def _guarded(self) -> None:
        try:
            await self._run(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._on_end(exc)
            return
        if not self._stop.is_set():
            self._on_end(LoopEndedError(f"{self.name} ended"))

    async def stop(self) -> None:
        """Ask the loop to stop and wait until it has (its own shutdown included)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.wait({task})

    @property
    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def ready(self) -> bool:
        return self.healthy
