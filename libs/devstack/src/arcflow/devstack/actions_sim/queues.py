"""The simulated service's message queues, one per scale set: job events wait as pending
until a long poll takes them as one message (at most ``MAX_JOBS_PER_MESSAGE`` events), and a
message stays until the listener acknowledges it, by deleting it or by polling past its id
(docs/upstream-behaviour.md#actions-simulator). No I/O and no waiting here: the engine's long
poll calls :meth:`MessageQueues.take` whenever something changed.
"""

from __future__ import annotations

import itertools
from typing import Any

from arcflow.devstack.actions_sim.model import MAX_JOBS_PER_MESSAGE, Message


class MessageQueues:
    """Pending events and unacknowledged messages of every scale set."""

    def __init__(self) -> None:
        self._pending: dict[int, list[dict[str, Any]]] = {}
        self._messages: dict[int, list[Message]] = {}
        self._message_ids = itertools.count(1)

    def open(self, scale_set_id: int) -> None:
        """A new scale set: its queue, empty."""
        self._pending[scale_set_id] = []
        self._messages[scale_set_id] = []

    def drop(self, scale_set_id: int) -> None:
        """A deleted scale set: what it had waiting goes with it."""
        self._pending.pop(scale_set_id, None)
        self._messages.pop(scale_set_id, None)

    def emit(self, scale_set_id: int, event: dict[str, Any]) -> None:
        """Queue one job event for the set's next message (nothing for a set that is gone)."""
        pending = self._pending.get(scale_set_id)
        if pending is not None:
            pending.append(event)

    def take(self, scale_set_id: int, last_message_id: int) -> Message | None:
        """The oldest message past ``last_message_id`` (which acknowledges everything up to
        it), else a new one from the pending events, else ``None``."""
        queue = self._messages.get(scale_set_id)
        if queue is None:
            return None
        queue[:] = [m for m in queue if m.id > last_message_id]
        if queue:
            return queue[0]
        pending = self._pending[scale_set_id]
        if not pending:
            return None
        batch = pending[:MAX_JOBS_PER_MESSAGE]
        del pending[:MAX_JOBS_PER_MESSAGE]
        message = Message(next(self._message_ids), batch)
        queue.append(message)
        return message

    def delete(self, scale_set_id: int, message_id: int) -> None:
        """The listener acknowledged ``message_id``."""
        queue = self._messages.get(scale_set_id, [])
        queue[:] = [m for m in queue if m.id != message_id]

    def snapshot(self, scale_set_id: int) -> dict[str, Any]:
        """What waits for the set: unacknowledged message ids and the pending event count."""
        return {
            "messageIds": [m.id for m in self._messages.get(scale_set_id, [])],
            "pendingEvents": len(self._pending.get(scale_set_id, [])),
        }
