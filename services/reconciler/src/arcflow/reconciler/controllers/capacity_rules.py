"""Pure: the ARS status of the shared capacity and the drain (ADR 0062).

The listener reports each variant's share in the ``arcflow.io/capacity-share`` annotation of
that variant's EphemeralRunnerSet, in the replica patch it sends anyway; the reconciler owns
the ARS status and lifts the reports into ``status.capacity``. A variant is drained when its
listener has applied the drain (its report says so) and its EphemeralRunnerSet has no runner
left; the set is ``Drained`` when every draining variant is. Runners are counted by the caller
from its cache of EphemeralRunners (``runners``, by EphemeralRunnerSet name): the set's status
counts are written at most every ``status_interval`` (ADR 0033), so a fresh set can read 0 there
while its runners run jobs. The status is the fallback for a set the caller did not count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from arcflow.common.capacity import ShareReport
from arcflow.common.constants import ANNOTATION_CAPACITY_SHARE
from arcflow.common.models import AutoscalingRunnerSet, EphemeralRunnerSet
from arcflow.common.models.autoscaling_runner_set import CapacityStatus, VariantCapacityStatus
from arcflow.common.naming import ephemeral_runner_set_name
from arcflow.common.quantity import QuantityError, non_negative_quantity, pod_request

CONDITION_DRAINED = "Drained"
REASON_DRAINING = "Draining"
REASON_DRAINED = "Drained"


@dataclass(frozen=True)
class DrainState:
    """``reason`` is ``Draining`` or ``Drained``; ``message`` names the variants."""

    reason: str
    message: str

    @property
    def drained(self) -> bool:
        return self.reason == REASON_DRAINED


def _by_name(runner_sets: Sequence[EphemeralRunnerSet]) -> dict[str, EphemeralRunnerSet]:
    return {ers.name: ers for ers in runner_sets}


def _report(ers: EphemeralRunnerSet | None) -> ShareReport | None:
    raw = ers.annotations.get(ANNOTATION_CAPACITY_SHARE) if ers is not None else None
    return ShareReport.decode(raw) if raw else None


def _runners(ers: EphemeralRunnerSet | None, counted: int | None = None) -> int:
    if ers is None:
        return 0
    if counted is not None:
        return counted
    return ers.status.current_replicas if ers.status is not None else 0


def _label(name: str) -> str:
    return f"variant {name}" if name else "the set"


def capacity_status(
    ars: AutoscalingRunnerSet,
    runner_sets: Sequence[EphemeralRunnerSet],
    runners: Mapping[str, int] | None = None,
) -> CapacityStatus | None:
    """``status.capacity`` from the listener's reports; ``None`` for a set without capacity.
    Only what is known is set (``share``/``advertised`` once a report came; ``total``/``used``
    when a report has them): the status carries the fields that were set."""
    spec = ars.spec
    uses = (
        spec.capacity is not None
        or spec.drain
        or any(v.priority is not None or v.drain for v in spec.runner_variants or [])
    )
    if not uses:
        return None
    by_name = _by_name(runner_sets)
    variants: list[VariantCapacityStatus] = []
    totals: dict[str, str] = {}
    used: dict[str, str] = {}
    for variant in spec.effective_variants():
        name = ephemeral_runner_set_name(ars.name, variant.name)
        ers = by_name.get(name)
        report = _report(ers)
        entry = VariantCapacityStatus(
            name=variant.name,
            priority=variant.priority,
            runners=_runners(ers, (runners or {}).get(name)),
            drain=variant.drain,
        )
        if report is not None:
            entry.share, entry.advertised = report.share, report.advertised
            totals = totals or report.total
            used = used or report.used
        variants.append(entry)
    out = CapacityStatus(variants=variants)
    if totals:
        out.total = totals
    if used:
        out.used = used
    return out


def drain_state(
    ars: AutoscalingRunnerSet,
    runner_sets: Sequence[EphemeralRunnerSet],
    runners: Mapping[str, int] | None = None,
) -> DrainState | None:
    """The drain of the set, ``None`` when nothing drains."""
    draining = [v for v in ars.spec.effective_variants() if v.drain]
    if not draining:
        return None
    by_name = _by_name(runner_sets)
    waiting: list[str] = []
    for variant in draining:
        name = ephemeral_runner_set_name(ars.name, variant.name)
        ers = by_name.get(name)
        report = _report(ers)
        left = _runners(ers, (runners or {}).get(name))
        if ers is not None and (report is None or not report.drain):
            waiting.append(f"{_label(variant.name)}: the listener has not applied the drain yet")
        elif left:
            waiting.append(f"{_label(variant.name)}: {left} runner(s) left")
    names = ", ".join(v.name or "(default)" for v in draining)
    if waiting:
        return DrainState(REASON_DRAINING, "; ".join(waiting))
    if ars.spec.drain:
        return DrainState(REASON_DRAINED, "the set is drained: no runner left, no new job taken")
    return DrainState(REASON_DRAINED, f"drained, no runner left, no new job taken: {names}")


def runners_creatable(
    ars: AutoscalingRunnerSet,
    ers_name: str,
    existing: Mapping[str, int],
    wanted: int,
    waiting: Mapping[str, int] | None = None,
) -> int:
    """How many of ``wanted`` new runners of the set's EphemeralRunnerSet ``ers_name`` fit in
    ``spec.capacity`` given the runners that exist in every variant (``existing``: ERS name ->
    runners, finished ones included: their pods may not be gone yet). The listener keeps the
    *jobs* within the budget; this keeps the *pods* within it while finished ones linger, and
    whatever GitHub assigned before the listener's first poll advertised a capacity.
    ``waiting`` (ERS name -> runners the other variants still want) reserves room for the
    variants of a higher priority than this one (ADR 0090)."""
    capacity = ars.spec.capacity
    if capacity is None or wanted <= 0:
        return max(0, wanted)
    priorities: dict[str, int] = {}
    try:
        totals = {k: non_negative_quantity(v) for k, v in (capacity.resources or {}).items()}
        costs: dict[str, dict[str, Fraction]] = {}
        for variant in ars.spec.effective_variants():
            priorities[ephemeral_runner_set_name(ars.name, variant.name)] = variant.priority or 0
            request = pod_request(variant.template) if totals else {}
            costs[ephemeral_runner_set_name(ars.name, variant.name)] = {
                k: request.get(k, Fraction(0)) for k in totals
            }
    except QuantityError:
        return wanted  # an invalid spec: its SpecValid condition says why
    if capacity.max_runners is not None:
        totals["runners"] = Fraction(capacity.max_runners)
        for cost in costs.values():
            cost["runners"] = Fraction(1)
    mine = costs.get(ers_name)
    if mine is None:
        return wanted
    left = dict(totals)
    mine_priority = priorities.get(ers_name, 0)
    for name, count in existing.items():
        for key, amount in costs.get(name, {}).items():
            left[key] -= amount * count
    for name, count in (waiting or {}).items():
        if name != ers_name and priorities.get(name, 0) > mine_priority:
            for key, amount in costs.get(name, {}).items():
                left[key] -= amount * count  # room kept for a higher priority that waits
    fits = wanted
    for key, amount in mine.items():
        if amount > 0:
            fits = min(fits, int(max(left[key], Fraction(0)) // amount))
    return max(0, fits)
