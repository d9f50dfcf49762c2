"""The simulator's per-scale-set message queues: events become messages of at most
``MAX_JOBS_PER_MESSAGE``, a message is given again until it is acknowledged (deleted, or polled
past), and a set that is gone takes nothing."""

from __future__ import annotations

from arcflow.devstack.actions_sim.model import MAX_JOBS_PER_MESSAGE
from arcflow.devstack.actions_sim.queues import MessageQueues


def _events(queues: MessageQueues, set_id: int, count: int) -> None:
    for index in range(count):
        queues.emit(set_id, {"messageType": "JobAvailable", "n": index})


def test_events_become_messages_given_again_until_acknowledged() -> None:
    queues = MessageQueues()
    queues.open(1)
    assert queues.take(1, 0) is None
    _events(queues, 1, MAX_JOBS_PER_MESSAGE + 1)
    first = queues.take(1, 0)
    assert first is not None
    assert len(first.events) == MAX_JOBS_PER_MESSAGE
    assert queues.take(1, 0) is first  # not acknowledged: the same message again
    second = queues.take(1, first.id)  # polled past it: acknowledged
    assert second is not None
    assert second.id > first.id
    assert [e["n"] for e in second.events] == [MAX_JOBS_PER_MESSAGE]
    queues.delete(1, second.id)
    assert queues.take(1, first.id) is None
    assert queues.snapshot(1) == {"messageIds": [], "pendingEvents": 0}


def test_sets_are_apart_and_a_dropped_set_takes_nothing() -> None:
    queues = MessageQueues()
    queues.open(1)
    queues.open(2)
    _events(queues, 1, 2)
    assert queues.take(2, 0) is None
    assert queues.snapshot(1) == {"messageIds": [], "pendingEvents": 2}
    queues.drop(1)
    _events(queues, 1, 1)
    assert queues.take(1, 0) is None
    assert queues.snapshot(1) == {"messageIds": [], "pendingEvents": 0}
