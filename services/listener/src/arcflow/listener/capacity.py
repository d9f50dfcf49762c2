"""The set's capacity board: one per listener process, shared by every pump and worker of the
set (ADR 0062, docs/listener.md#shared-capacity-capacitypy-allocationpy-adr-0062,
docs/upstream-behaviour.md#capacity-header).

It keeps each variant's newest statistics, reruns the pure :func:`~arcflow.listener.allocation.
allocate` on every change, and answers two questions:

- **the worker's cap** (:meth:`CapacityBoard.runner_cap`): the variant's share, so the ERS is
  never asked for more runners than the share;
- **the capacity header of the next long poll** (:meth:`CapacityBoard.grant`): the share,
  0 while draining, but *raised* only as far as what every sibling's server-side capacity may
  still be allows. GitHub keeps the last ``X-ScaleSetMaxCapacity`` of each scale set until
  that scale set's next poll, and nothing says when a poll reached the server; only an
  answered poll proves the server holds its value. So a sibling's capacity counts at the
  largest value it sent since its last answered poll (its full share before its first answer
  in this process), and a raise waits until lowered siblings have been answered. Lowering is
  always safe and goes out at once: the pump whose grant changed abandons its long poll and
  polls again (:meth:`CapacityBoard.changed`).

The sum of ``assigned + running`` jobs over the set's scale sets therefore never exceeds the
budget, at the price of a raise waiting up to one long poll after a sibling was lowered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from arcflow.common.capacity import CapacityFormatError, SetCapacity, ShareReport
from arcflow.common.events import JobStatistics
from arcflow.common.listener_config import ListenerConfig
from arcflow.common.quantity import QuantityError, format_quantity
from arcflow.listener.allocation import (
    RUNNERS,
    Allocation,
    Budget,
    VariantDemand,
    advertised,
    allocate,
)
from arcflow.listener.config import ConfigError, ScaleSetTarget

log = logging.getLogger("arcflow.listener.capacity")


@dataclass
class _Slot:
    """One variant: its static inputs, newest statistics and the polls it sent."""

    target: ScaleSetTarget
    priority: int
    drain: bool
    cost: dict[str, Fraction]
    stats: JobStatistics | None = None
    #: Capacity of the last poll the server answered; None before the first answer.
    answered: int | None = None
    #: Polls sent and not yet superseded by an answer: poll id -> capacity.
    sent: dict[int, int] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    on_change: list[Callable[[], None]] = field(default_factory=list)
    last_share: int | None = None


class CapacityBoard:
    """Shares one :class:`SetCapacity` among the targets; see the module text."""

    def __init__(self, capacity: SetCapacity, targets: Sequence[ScaleSetTarget]) -> None:
        self.capacity = capacity
        resources = capacity.resource_amounts()
        self.budget = Budget(max_runners=capacity.max_runners, resources=resources)
        self.total = self.budget.totals()
        self._slots: dict[str, _Slot] = {}
        for target in targets:
            variant = capacity.variant(target.ephemeral_runner_set_name)
            request = variant.request_amounts()
            cost = {k: request.get(k, Fraction(0)) for k in self.total if k != RUNNERS}
            if RUNNERS in self.total:
                cost[RUNNERS] = Fraction(1)
            self._slots[target.ephemeral_runner_set_name] = _Slot(
                target=target, priority=variant.priority, drain=variant.drain, cost=cost
            )
        self._poll_ids = 0
        self.allocation: Allocation = self._allocate()
        self.reallocations = 0

    # --- inputs --------------------------------------------------------------------------
    def observe(self, ers_name: str, stats: JobStatistics) -> None:
        """Newest statistics of one variant; reallocates when its demand moved."""
        slot = self._slots[ers_name]
        before = slot.stats
        slot.stats = stats
        if before is not None and _demand_key(before) == _demand_key(stats):
            return
        previous = self.allocation.shares
        self.allocation = self._allocate()
        self.reallocations += 1
        if self.allocation.shares != previous:
            log.info(
                "capacity shares: %s",
                ", ".join(f"{n or 'default'}={s}" for n, s in self._named_shares().items()),
            )
        self._signal()

    def subscribe(self, ers_name: str, callback: Callable[[], None]) -> None:
        """``callback()`` whenever this variant's share changed."""
        self._slots[ers_name].on_change.append(callback)

    # --- the worker ----------------------------------------------------------------------
    def share(self, ers_name: str) -> int:
        return self.allocation.shares[ers_name]

    def runner_cap(self, ers_name: str) -> int:
        """At most this many runners for the variant (its share; its committed jobs when it
        drains)."""
        return self.share(ers_name)

    def report(self, ers_name: str) -> ShareReport:
        slot = self._slots[ers_name]
        share = self.share(ers_name)
        return ShareReport(
            share=share,
            advertised=advertised(self._demand(slot), share),
            drain=slot.drain,
            used={k: format_quantity(v) for k, v in sorted(self.allocation.used.items())},
            total={k: format_quantity(v) for k, v in sorted(self.allocation.total.items())},
        )

    # --- the pump ------------------------------------------------------------------------
    def changed(self, ers_name: str) -> asyncio.Event:
        """Set when the grant of this variant's next poll differs from its poll in flight."""
        return self._slots[ers_name].changed

    def grant(self, ers_name: str) -> tuple[int, int]:
        """``(poll id, X-ScaleSetMaxCapacity)`` for the poll about to be sent."""
        slot = self._slots[ers_name]
        capacity = self._grant_for(slot)
        self._poll_ids += 1
        slot.sent[self._poll_ids] = capacity
        slot.changed.clear()
        return self._poll_ids, capacity

    def answered(self, ers_name: str, poll_id: int) -> None:
        """The server answered poll ``poll_id``: it holds that poll's capacity (or a later
        one's, still in ``sent``)."""
        slot = self._slots[ers_name]
        capacity = slot.sent.get(poll_id)
        if capacity is None:
            return
        slot.answered = capacity
        slot.sent = {i: c for i, c in slot.sent.items() if i > poll_id}
        self._signal()

    # --- internals -----------------------------------------------------------------------
    def _demand(self, slot: _Slot) -> VariantDemand:
        stats = slot.stats
        target = slot.target
        return VariantDemand(
            name=target.ephemeral_runner_set_name,
            priority=slot.priority,
            min_runners=target.min_runners,
            max_runners=target.max_runners,
            pod_request={k: v for k, v in slot.cost.items() if k != RUNNERS},
            drain=slot.drain,
            assigned=stats.total_assigned_jobs if stats else 0,
            available=stats.total_available_jobs if stats else 0,
        )

    def _allocate(self) -> Allocation:
        return allocate([self._demand(s) for s in self._slots.values()], self.budget)

    def _named_shares(self) -> dict[str, int]:
        return {s.target.variant: self.share(n) for n, s in self._slots.items()}

    def _bounded(self, slot: _Slot) -> bool:
        return any(amount > 0 for amount in slot.cost.values())

    def _hold(self, slot: _Slot) -> int:
        """The most jobs this variant's scale set may hold on the server right now."""
        committed = slot.stats.total_assigned_jobs if slot.stats else 0
        known = slot.answered if slot.answered is not None else slot.target.max_runners
        return max([committed, known, *slot.sent.values()])

    def _grant_for(self, slot: _Slot) -> int:
        name = slot.target.ephemeral_runner_set_name
        wanted = advertised(self._demand(slot), self.share(name))
        if not self._bounded(slot):
            return wanted
        known = [] if slot.answered is None else [slot.answered]
        current = max([*known, *slot.sent.values()], default=None)
        if current is not None and wanted <= current:
            return wanted  # lowering (or keeping) is always safe
        left = dict(self.total)
        for other in self._slots.values():
            if other is slot or not self._bounded(other):
                continue
            hold = self._hold(other)
            for key, amount in other.cost.items():
                left[key] -= amount * hold
        fits = wanted
        for key, amount in slot.cost.items():
            if amount > 0:
                fits = min(fits, int(max(left[key], Fraction(0)) // amount))
        committed = slot.stats.total_assigned_jobs if slot.stats else 0
        return max(0, min(wanted, max(fits, min(committed, wanted))))

    def _signal(self) -> None:
        for name, slot in self._slots.items():
            if slot.sent and self._grant_for(slot) != slot.sent[max(slot.sent)]:
                slot.changed.set()
            share = self.share(name)
            if share != slot.last_share:
                slot.last_share = share
                for callback in slot.on_change:
                    callback()


def capacity_board_of(
    config: ListenerConfig, targets: Sequence[ScaleSetTarget]
) -> CapacityBoard | None:
    """The board for ``config.json``'s ``capacity`` key; ``None`` without one.
    :class:`~arcflow.listener.config.ConfigError` when it is malformed."""
    if config.capacity is None:
        return None
    try:
        capacity = SetCapacity.from_json_dict(config.capacity)
        return CapacityBoard(capacity, targets)
    except (CapacityFormatError, QuantityError) as exc:
        raise ConfigError(f"config.json capacity: {exc}") from None


def _demand_key(stats: JobStatistics) -> tuple[int, int]:
    return stats.total_assigned_jobs, stats.total_available_jobs
