"""The deadline of each handler call, kept by one timer per consumer (ADR 0009, ADR 0055).

``asyncio.timeout`` around every call schedules and cancels one timer per message and costs
about a tenth of the whole consume path when handlers are quick. All calls of one consumer
share the same deadline length, so a later call is never due before an earlier one: one timer
set for the oldest call in flight is enough. When it fires it abandons every call that is due
(cancels the task running it) and sets itself for the oldest call still in flight. A call costs
a dictionary entry instead of a timer.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arcflow.common.events import EventBase
    from arcflow.common.nats.consume import Delivery, EventHandler
    from arcflow.common.service.spec import Handler


class HandlerDeadlineExceededError(TimeoutError):
    """A handler call overran its deadline and was cancelled; the message will be retried."""


class DeadlineWatch:
    """Abandons handler calls that run longer than ``seconds`` (see the module docstring).

    A handler bound with :meth:`bind` runs in the settling task; past its deadline the task is
    cancelled and the call raises :class:`HandlerDeadlineExceededError` instead of the
    cancellation. A ``TimeoutError`` raised by the call itself (a client's own timeout) goes
    through unchanged, and so does a cancellation that is not ours (the service stopping).
    """

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("a deadline must be positive")
        self.seconds = seconds
        self._due: dict[asyncio.Task[object], float] = {}  # in call order, so oldest first
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def in_flight(self) -> int:
        """Calls being watched now."""
        return len(self._due)

    def bind(self, handler: Handler, state: Any) -> EventHandler:
        """``handler(state, event, delivery)`` as an event handler whose every call is watched
        (one coroutine per call: this runs once per message)."""

        async def handle(event: EventBase, delivery: Delivery) -> None:
            task = asyncio.current_task()
            if task is None or task in self._due:  # nested in a watched call: one deadline
                await handler(state, event, delivery)
                return
            loop = task.get_loop()
            due = loop.time() + self.seconds
            self._due[task] = due
            if self._timer is None:
                self._timer = loop.call_at(due, self._expire, loop)
            try:
                await handler(state, event, delivery)
            except asyncio.CancelledError:
                if task in self._expired and task.uncancel() == 0:
                    raise HandlerDeadlineExceededError(
                        f"handler overran its {self.seconds:g} s deadline and was abandoned"
                    ) from None
                raise
            else:
                if task in self._expired:  # the call swallowed our cancellation: undo it
                    task.uncancel()
            finally:
                del self._due[task]
                self._expired.discard(task)

        return handle

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        next_due: float | None = None
        for task, due in list(self._due.items()):
            if task in self._expired:
                continue
            if due <= now:
                self._expired.add(task)
                task.cancel()
            elif next_due is None:
                next_due = due  # the oldest call still running: the next one due
        if next_due is not None:
            self._timer = loop.call_at(next_due, self._expire, loop)
