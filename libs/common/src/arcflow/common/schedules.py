"""Scheduled minimums: which ``scheduledOverrides`` window is open at a moment, and what
minimum it gives (docs/models.md#scheduled-minimums, ADR 0063).

Pure (standard library only): the reconciler (status, requeue at the next boundary), the
listener (the minimum of every decision) and ``arcflow plan`` (the windows) all call it with
the time they choose, so tests give it any clock.

The semantics are those of ARC's legacy HorizontalRunnerAutoscaler
(docs/upstream-behaviour.md#scheduled-overrides):

* Times are RFC 3339 date-times with an offset (``Z`` or ``+02:00``). A recurrence repeats in
  that fixed offset: ``09:00+02:00`` is 07:00 UTC every day of the year (no daylight saving).
* An override without ``recurrenceRule`` is open for ``[startTime, endTime)``. With one, the
  window repeats every day, week, month or year from ``startTime`` for the same length;
  occurrences start at or before ``untilTime`` when that is set. A monthly window on the
  31st skips months without a 31st and a yearly one on 29 February skips common years (the
  calendar rule the legacy autoscaler's recurrence library follows).
* Overrides are evaluated in order; the first open one gives the minimum, capped by
  ``maxRunners``. None open: the configured ``minRunners``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

FREQUENCIES = ("Daily", "Weekly", "Monthly", "Yearly")
#: The shortest period of each frequency; a window may not be longer (occurrences of one
#: override never overlap).
SHORTEST_PERIOD = {
    "Daily": timedelta(days=1),
    "Weekly": timedelta(days=7),
    "Monthly": timedelta(days=28),
    "Yearly": timedelta(days=365),
}
#: Bounds of the per-list sizes (the CRD's maxItems; they keep its CEL rules cheap).
MAX_SCHEDULED_OVERRIDES = 32
MAX_OVERRIDE_VARIANTS = 32

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")
_DAY = timedelta(days=1)
#: A calendar skip is never longer than this many candidates (Feb 29: eight years).
_MAX_SKIPS = 12


class ScheduleError(ValueError):
    """A value that cannot be evaluated; the message names the field, never a secret."""


def parse_time(text: object, what: str = "time") -> datetime:
    """An RFC 3339 date-time with an offset, as an aware datetime in that offset."""
    if not isinstance(text, str) or not _RFC3339.match(text):
        raise ScheduleError(
            f"{what} must be an RFC 3339 date-time with an offset, e.g. 2026-01-05T09:00:00+02:00"
        )
    normalised = text.replace("z", "Z").replace("t", "T")
    fraction = re.search(r"\.(\d+)", normalised)
    if fraction and len(fraction.group(1)) > 6:  # datetime keeps microseconds
        normalised = normalised.replace(fraction.group(0), "." + fraction.group(1)[:6])
    try:
        value = datetime.fromisoformat(normalised)
    except ValueError:
        raise ScheduleError(f"{what} is not a valid date and time") from None
    if value.tzinfo is None:  # pragma: no cover - the pattern requires an offset
        raise ScheduleError(f"{what} needs an offset")
    return value


def format_time(value: datetime) -> str:
    """RFC 3339 in the value's own offset (``Z`` for UTC), seconds precision."""
    text = value.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


@dataclass(frozen=True)
class ScheduledOverride:
    """One override, parsed: ``[start, end)``, repeated by ``frequency`` until ``until``."""

    start: datetime
    end: datetime
    min_runners: int
    frequency: str = ""
    until: datetime | None = None
    #: Where it was declared (``spec.scheduledOverrides[0]``), for status, plan and logs.
    source: str = ""

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    def occurrence(self, k: int) -> datetime | None:
        """The start of candidate ``k`` (0 = ``start``), ``None`` when the calendar skips it
        (or ``k`` is out of the calendar's range); ignores ``until``."""
        start = self.start
        if self.frequency in ("Daily", "Weekly"):
            step = 1 if self.frequency == "Daily" else 7
            try:
                return start + k * step * _DAY  # a fixed offset: no DST, days are 24 h
            except OverflowError:
                return None
        if self.frequency == "Monthly":
            months = start.month - 1 + k
            year, month = start.year + months // 12, months % 12 + 1
        elif self.frequency == "Yearly":
            year, month = start.year + k, start.month
        else:
            return start if k == 0 else None
        try:
            return start.replace(year=year, month=month)
        except ValueError:  # no such day in that month (or year out of range)
            return None

    def _candidate_index(self, at: datetime) -> int:
        """A ``k`` whose candidate starts at or just before ``at`` (never after it)."""
        if self.frequency in ("Daily", "Weekly"):
            step = SHORTEST_PERIOD[self.frequency]
            return (at - self.start) // step
        local = at.astimezone(self.start.tzinfo)
        if self.frequency == "Monthly":
            return (local.year - self.start.year) * 12 + local.month - self.start.month
        if self.frequency == "Yearly":
            return local.year - self.start.year
        return 0

    def _valid(self, begins: datetime | None) -> bool:
        return begins is not None and (self.until is None or begins <= self.until)

    def window_at(self, now: datetime) -> tuple[datetime, datetime] | None:
        """The open occurrence ``[begin, end)`` containing ``now``, else ``None``."""
        if now < self.start:
            return None
        if not self.frequency:
            return (self.start, self.end) if now < self.end else None
        k = self._candidate_index(now)
        for _ in range(_MAX_SKIPS):
            if k < 0:
                return None
            begins = self.occurrence(k)
            if begins is not None and begins <= now:
                # Occurrences never overlap (a window is at most one shortest period), so only
                # the latest start at or before ``now`` can hold it.
                if self._valid(begins) and now < begins + self.duration:
                    return begins, begins + self.duration
                return None
            k -= 1
        return None

    def windows_from(self, now: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Every occurrence that has not ended at ``now``, in order (the open one first)."""
        current = self.window_at(now)
        if current is not None:
            yield current
        if not self.frequency:
            if current is None and now < self.start:
                yield self.start, self.end
            return
        # The candidate of ``now``'s own period may still lie ahead (the 31st, on the 5th).
        k = max(self._candidate_index(now), 0) if now >= self.start else 0
        skipped = 0
        while skipped < _MAX_SKIPS:
            begins = self.occurrence(k)
            k += 1
            if begins is None:
                skipped += 1
                continue
            skipped = 0
            if begins <= now:
                continue
            if not self._valid(begins):
                return
            yield begins, begins + self.duration

    def next_boundary(self, now: datetime) -> datetime | None:
        """The first moment after ``now`` at which this override opens or closes."""
        current = self.window_at(now)
        if current is not None:
            return current[1]
        for begins, _ends in self.windows_from(now):
            if begins > now:
                return begins
        return None


def parse_override(raw: object, path: str) -> ScheduledOverride:
    """One ``scheduledOverrides`` item (camelCase keys, as in the CRD and config.json)."""
    if not isinstance(raw, Mapping):
        raise ScheduleError(f"{path} must be an object")
    start = parse_time(raw.get("startTime"), f"{path}.startTime")
    end = parse_time(raw.get("endTime"), f"{path}.endTime")
    minimum = raw.get("minRunners")
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
        raise ScheduleError(f"{path}.minRunners must be an integer >= 0")
    if end <= start:
        raise ScheduleError(f"{path}.endTime must be after startTime")
    rule = raw.get("recurrenceRule")
    frequency = ""
    until = None
    if rule is not None:
        if not isinstance(rule, Mapping):
            raise ScheduleError(f"{path}.recurrenceRule must be an object")
        frequency = str(rule.get("frequency") or "")
        if frequency not in FREQUENCIES:
            raise ScheduleError(
                f"{path}.recurrenceRule.frequency must be one of {', '.join(FREQUENCIES)}"
            )
        if end - start > SHORTEST_PERIOD[frequency]:
            raise ScheduleError(f"{path} is longer than its {frequency} recurrence")
        if rule.get("untilTime") is not None:
            until = parse_time(rule.get("untilTime"), f"{path}.recurrenceRule.untilTime")
    return ScheduledOverride(start, end, minimum, frequency, until, path)


def parse_overrides(raw: Iterable[object] | None, path: str) -> tuple[ScheduledOverride, ...]:
    """A whole list; :class:`ScheduleError` on the first bad item."""
    return tuple(parse_override(item, f"{path}[{i}]") for i, item in enumerate(raw or ()))


def active_override(
    overrides: Sequence[ScheduledOverride], now: datetime
) -> ScheduledOverride | None:
    """The first override open at ``now`` (declared order wins)."""
    for override in overrides:
        if override.window_at(now) is not None:
            return override
    return None


@dataclass(frozen=True)
class EffectiveMinimum:
    """The minimum in force at one moment and why."""

    min_runners: int
    #: ``source`` of the open override, ``""`` when the configured minRunners applies.
    override: str = ""
    #: When the next window of the list opens or closes (the value may change then).
    next_change: datetime | None = None


def effective_minimum(
    min_runners: int,
    max_runners: int,
    overrides: Sequence[ScheduledOverride],
    now: datetime,
) -> EffectiveMinimum:
    """``min_runners`` replaced by the first open override's minRunners, capped by
    ``max_runners``; with the next boundary of any override (a level to re-check at)."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    active = active_override(overrides, now)
    boundaries = [b for b in (o.next_boundary(now) for o in overrides) if b is not None]
    next_change = min(boundaries) if boundaries else None
    if active is None:
        return EffectiveMinimum(min_runners, "", next_change)
    return EffectiveMinimum(min(active.min_runners, max_runners), active.source, next_change)


# --- which overrides apply to which variant ----------------------------------------------------


def overrides_for_variant(
    set_overrides: Sequence[Mapping[str, Any]] | None,
    variant_overrides: Sequence[Mapping[str, Any]] | None,
    variant: str,
    variant_index: int | None = None,
) -> list[tuple[str, Mapping[str, Any]]]:
    """``(path, raw override)`` pairs that apply to ``variant`` (``""``: the default one).

    A variant's own list, when set (even ``[]``), is all it gets. Otherwise the set's list
    applies, minus the items whose ``variants`` names other variants (no ``variants``: every
    variant)."""
    if variant_overrides is not None and variant_index is not None:
        base = f"spec.runnerVariants[{variant_index}].scheduledOverrides"
        return [(f"{base}[{i}]", o) for i, o in enumerate(variant_overrides)]
    chosen: list[tuple[str, Mapping[str, Any]]] = []
    for i, item in enumerate(set_overrides or ()):
        names = item.get("variants") if isinstance(item, Mapping) else None
        if names and variant not in names:
            continue
        chosen.append((f"spec.scheduledOverrides[{i}]", item))
    return chosen


def resolved_overrides(spec_doc: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per variant name, the raw overrides that apply to it (each with its ``source`` path
    added, without ``variants``), from an ARS ``spec`` manifest; variants without any are left
    out, so a set without overrides gives ``{}``."""
    set_overrides = spec_doc.get("scheduledOverrides")
    variants = spec_doc.get("runnerVariants") or []
    pairs: list[tuple[str, int | None, Any]] = (
        [(str(v.get("name", "")), i, v.get("scheduledOverrides")) for i, v in enumerate(variants)]
        if variants
        else [("", None, None)]
    )
    result: dict[str, list[dict[str, Any]]] = {}
    for name, index, own in pairs:
        chosen = overrides_for_variant(set_overrides, own, name, index)
        if chosen:
            result[name] = [_portable(path, item) for path, item in chosen]
    return result


def _portable(path: str, item: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in item.items() if k != "variants"}
    out["source"] = path
    return out


def parse_resolved(raw: Iterable[Mapping[str, Any]] | None) -> tuple[ScheduledOverride, ...]:
    """The items of :func:`resolved_overrides` (``source`` kept) parsed again, e.g. from
    the listener's config.json."""
    parsed = []
    for i, item in enumerate(raw or ()):
        source = str(item.get("source") or f"scheduledOverrides[{i}]")
        parsed.append(parse_override(item, source))
    return tuple(parsed)


def utc_now() -> datetime:
    """The default clock (aware, UTC)."""
    return datetime.now(UTC)
