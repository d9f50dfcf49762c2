"""Sharing one capacity budget among the variants of a set (ADR 0062, docs/models.md#capacity).

Pure: :func:`allocate` turns each variant's demand (from its scale set's statistics) and the
set's budget into a share per variant: the number of runners, and of jobs in
``X-ScaleSetMaxCapacity``, that variant may have. The rule, in three passes:

1. **Committed first.** A variant keeps what GitHub already gave it (its assigned jobs, capped
   at its own ``maxRunners``): an assigned job cannot be taken back, so it counts against the
   budget whatever its priority. A drained variant keeps only this.
2. **Demand by priority.** What is left goes to the outstanding demand (``minRunners`` +
   assigned + available jobs, capped at ``maxRunners``, minus the committed part), highest
   ``priority`` first. Variants of equal priority share in proportion to their outstanding
   demand: each next runner goes to the variant furthest below its exact proportional
   share, so no share is a whole runner above it.
3. **Headroom round robin.** What is still left is spread one runner at a time over every
   variant that is not drained and below its own ``maxRunners``, in priority order. GitHub's
   direct assignment mode reports no waiting job to a scale set without room, so a variant
   with a share of 0 would never learn it has work: headroom is how it does.

A runner costs one of ``maxRunners`` and its pod's effective request of each resource the
budget names; a runner that does not fit in what is left is not given. The sum of the shares
never exceeds the budget, except when the committed runners alone already do (the budget was
lowered under running jobs): then every share is its committed count and nothing new fits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

#: The budget key of the runner count (a pod costs 1 of it).
RUNNERS = "runners"


@dataclass(frozen=True)
class VariantDemand:
    """One variant's input: its limits, its pod's cost, and what its statistics say."""

    name: str
    priority: int = 0
    min_runners: int = 0
    max_runners: int = 2**31 - 1
    #: Effective request of one runner pod, per resource name.
    pod_request: Mapping[str, Fraction] = field(default_factory=dict)
    drain: bool = False
    #: ``totalAssignedJobs``: jobs GitHub gave this scale set (running or waiting for a runner).
    assigned: int = 0
    #: ``totalAvailableJobs``: jobs offered to it and not yet assigned (GHES acquire mode).
    available: int = 0

    @property
    def committed(self) -> int:
        return max(0, min(self.assigned, self.max_runners))

    @property
    def wanted(self) -> int:
        """Runners it would run with no budget: min + assigned + available, up to its max."""
        if self.drain:
            return self.committed
        return max(0, min(self.min_runners + self.assigned + self.available, self.max_runners))


@dataclass(frozen=True)
class Budget:
    """The set's capacity: ``max_runners`` (None: unbounded) and resource totals."""

    max_runners: int | None = None
    resources: Mapping[str, Fraction] = field(default_factory=dict)

    @property
    def bounded(self) -> bool:
        return self.max_runners is not None or bool(self.resources)

    def totals(self) -> dict[str, Fraction]:
        out = {name: Fraction(amount) for name, amount in self.resources.items()}
        if self.max_runners is not None:
            out[RUNNERS] = Fraction(self.max_runners)
        return out


@dataclass(frozen=True)
class Allocation:
    """The result: a share per variant and what the shares use of each budget key."""

    shares: dict[str, int]
    #: Per budget key: the total and what the shares take of it.
    used: dict[str, Fraction]
    total: dict[str, Fraction]
    #: The committed runners alone exceed the budget (it was lowered under running jobs).
    overcommitted: bool = False


def _cost(variant: VariantDemand, keys: Sequence[str]) -> dict[str, Fraction]:
    cost = {k: Fraction(variant.pod_request.get(k, 0)) for k in keys if k != RUNNERS}
    if RUNNERS in keys:
        cost[RUNNERS] = Fraction(1)
    return cost


def _fits(left: Mapping[str, Fraction], cost: Mapping[str, Fraction]) -> bool:
    return all(left[k] >= amount for k, amount in cost.items())


def _take(left: dict[str, Fraction], cost: Mapping[str, Fraction], times: int = 1) -> None:
    for key, amount in cost.items():
        left[key] -= amount * times


def _unbounded(cost: Mapping[str, Fraction]) -> bool:
    """A pod that costs nothing of any budget key is not limited by the budget."""
    return not any(amount > 0 for amount in cost.values())


def allocate(variants: Sequence[VariantDemand], budget: Budget) -> Allocation:
    """The share of every variant (keyed by name) under ``budget``; see the module text."""
    total = budget.totals()
    keys = list(total)
    costs = {v.name: _cost(v, keys) for v in variants}
    left = dict(total)
    shares: dict[str, int] = {}
    # Variants the budget does not bound (no budget key, or a pod requesting none of the
    # budget's resources) get their own maximum, or only their committed jobs when drained.
    bounded: list[VariantDemand] = []
    for variant in variants:
        if _unbounded(costs[variant.name]):
            shares[variant.name] = variant.committed if variant.drain else variant.max_runners
        else:
            bounded.append(variant)
    # 1. committed
    for variant in bounded:
        shares[variant.name] = variant.committed
        _take(left, costs[variant.name], variant.committed)
    overcommitted = any(amount < 0 for amount in left.values())
    if not overcommitted:
        order = sorted(bounded, key=lambda v: -v.priority)  # stable: declared order within
        # 2. demand, tier by tier
        for priority in sorted({v.priority for v in order}, reverse=True):
            tier = [v for v in order if v.priority == priority]
            _share_demand(tier, shares, costs, left)
        # 3. headroom round robin
        _spread_headroom([v for v in order if not v.drain], shares, costs, left)
    used = {key: total[key] - max(left[key], Fraction(0)) for key in keys}
    if overcommitted:
        used = {key: total[key] - left[key] for key in keys}
    return Allocation(shares=shares, used=used, total=total, overcommitted=overcommitted)


def _share_demand(
    tier: Sequence[VariantDemand],
    shares: dict[str, int],
    costs: Mapping[str, Mapping[str, Fraction]],
    left: dict[str, Fraction],
) -> None:
    """Give the tier its outstanding demand; short of it, in proportion to that demand."""
    outstanding = {v.name: v.wanted - v.committed for v in tier if v.wanted > v.committed}
    given = dict.fromkeys(outstanding, 0)
    if set(left) == {RUNNERS}:
        # Only the runner count binds: largest remainders, exact to within one runner.
        count = min(int(left[RUNNERS]), sum(outstanding.values()))
        for name, amount in _largest_remainders(outstanding, count).items():
            shares[name] += amount
            left[RUNNERS] -= amount
        return
    while True:
        candidates = [
            name
            for name, want in outstanding.items()
            if given[name] < want and _fits(left, costs[name])
        ]
        if not candidates:
            return
        demand = sum(outstanding[name] for name in candidates)
        step = sum(given[name] for name in candidates) + 1
        # The largest deficit against the exact proportional share after this step,
        # ``step * want / demand - given``, compared without division; declared order breaks
        # ties (max keeps the first of equals).
        name = max(candidates, key=lambda n: step * outstanding[n] - given[n] * demand)
        given[name] += 1
        shares[name] += 1
        _take(left, costs[name])


def _largest_remainders(wants: Mapping[str, int], count: int) -> dict[str, int]:
    """``count`` runners split in proportion to ``wants`` (Hamilton's method); the remainders
    go to the largest fractions, declared order first among equals."""
    total = sum(wants.values())
    if total == 0 or count <= 0:
        return dict.fromkeys(wants, 0)
    out = {name: count * want // total for name, want in wants.items()}
    rest = count - sum(out.values())
    by_remainder = sorted(wants, key=lambda n: -((count * wants[n]) % total))
    for name in by_remainder[:rest]:
        out[name] += 1
    return out


def _spread_headroom(
    order: Sequence[VariantDemand],
    shares: dict[str, int],
    costs: Mapping[str, Mapping[str, Fraction]],
    left: dict[str, Fraction],
) -> None:
    """One runner at a time to each variant with room, in priority order, until none fits."""
    while True:
        gave = False
        for variant in order:
            name = variant.name
            if shares[name] < variant.max_runners and _fits(left, costs[name]):
                shares[name] += 1
                _take(left, costs[name])
                gave = True
        if not gave:
            return


def advertised(variant: VariantDemand, share: int) -> int:
    """The ``X-ScaleSetMaxCapacity`` for ``variant``: its share, 0 while it drains."""
    return 0 if variant.drain else max(0, share)
