"""``arcflow.common.schedules``: windows, recurrences, offsets, until, first-wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcflow.common.schedules import (
    ScheduleError,
    effective_minimum,
    format_time,
    overrides_for_variant,
    parse_override,
    parse_resolved,
    parse_time,
    resolved_overrides,
)

UTC = UTC


def at(text: str) -> datetime:
    return parse_time(text)


def override(
    start: str,
    end: str,
    minimum: int = 3,
    frequency: str | None = None,
    until: str | None = None,
    source: str = "o",
) -> Any:
    raw: dict[str, Any] = {"startTime": start, "endTime": end, "minRunners": minimum}
    if frequency is not None:
        raw["recurrenceRule"] = {"frequency": frequency}
        if until is not None:
            raw["recurrenceRule"]["untilTime"] = until
    return parse_override(raw, source)


# --- times -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["2026-01-05T09:00:00", "2026-01-05 09:00:00Z", "09:00", "2026-01-05", "", 5, None],
)
def test_a_time_needs_date_clock_and_offset(text: object) -> None:
    with pytest.raises(ScheduleError, match="RFC 3339 date-time with an offset"):
        parse_time(text, "spec.scheduledOverrides[0].startTime")


def test_offsets_and_fractions_parse() -> None:
    assert parse_time("2026-01-05T09:00:00+02:00") == datetime(2026, 1, 5, 7, tzinfo=UTC)
    assert parse_time("2026-01-05t07:00:00.123456789z") == datetime(
        2026, 1, 5, 7, 0, 0, 123456, tzinfo=UTC
    )
    assert format_time(parse_time("2026-01-05T07:00:00Z")) == "2026-01-05T07:00:00Z"
    assert format_time(parse_time("2026-01-05T09:00:00+02:00")) == "2026-01-05T09:00:00+02:00"


def test_an_invalid_calendar_date_is_refused() -> None:
    with pytest.raises(ScheduleError, match="not a valid date"):
        parse_time("2026-02-30T09:00:00Z")


# --- one-off windows ---------------------------------------------------------------------------


def test_a_window_is_half_open() -> None:
    o = override("2026-01-05T09:00:00Z", "2026-01-05T17:00:00Z")
    assert o.window_at(at("2026-01-05T08:59:59Z")) is None
    assert o.window_at(at("2026-01-05T09:00:00Z")) is not None
    assert o.window_at(at("2026-01-05T16:59:59Z")) is not None
    assert o.window_at(at("2026-01-05T17:00:00Z")) is None
    assert o.next_boundary(at("2026-01-05T08:00:00Z")) == at("2026-01-05T09:00:00Z")
    assert o.next_boundary(at("2026-01-05T10:00:00Z")) == at("2026-01-05T17:00:00Z")
    assert o.next_boundary(at("2026-01-05T17:00:00Z")) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"startTime": "2026-01-05T17:00:00Z", "endTime": "2026-01-05T09:00:00Z"}, "after"),
        ({"startTime": "2026-01-05T09:00:00Z", "endTime": "2026-01-05T09:00:00Z"}, "after"),
        (
            {
                "startTime": "2026-01-05T09:00:00Z",
                "endTime": "2026-01-05T17:00:00Z",
                "recurrenceRule": {"frequency": "Hourly"},
            },
            "one of Daily, Weekly, Monthly, Yearly",
        ),
        (
            {
                "startTime": "2026-01-05T09:00:00Z",
                "endTime": "2026-01-06T10:00:00Z",
                "recurrenceRule": {"frequency": "Daily"},
            },
            "longer than its Daily recurrence",
        ),
    ],
)
def test_bad_overrides_say_what_is_wrong(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse_override({"minRunners": 1, **raw}, "spec.scheduledOverrides[0]")


# --- offsets: fixed, DST-free --------------------------------------------------------------------


def test_a_daily_window_keeps_its_utc_offset_all_year() -> None:
    """09:00+02:00 is 07:00 UTC in January and in July: an offset is not a zone."""
    o = override("2026-01-05T09:00:00+02:00", "2026-01-05T17:00:00+02:00", frequency="Daily")
    for day in ("2026-01-20", "2026-03-29", "2026-07-01", "2026-10-25", "2027-12-31"):
        assert o.window_at(at(f"{day}T06:59:59Z")) is None
        begin, end = o.window_at(at(f"{day}T07:00:00Z")) or (None, None)
        assert begin == at(f"{day}T07:00:00Z")
        assert end == at(f"{day}T15:00:00Z")
        assert o.window_at(at(f"{day}T15:00:00Z")) is None


def test_a_negative_offset_crosses_the_utc_date() -> None:
    o = override("2026-01-05T20:00:00-05:00", "2026-01-05T23:00:00-05:00", frequency="Daily")
    assert o.window_at(at("2026-03-10T02:30:00Z")) == (
        at("2026-03-09T20:00:00-05:00"),
        at("2026-03-09T23:00:00-05:00"),
    )


def test_weekly_repeats_on_the_same_weekday() -> None:
    monday = "2026-01-05"  # a Monday
    o = override(f"{monday}T08:00:00Z", f"{monday}T18:00:00Z", frequency="Weekly")
    assert o.window_at(at("2026-01-12T12:00:00Z")) is not None  # Monday
    assert o.window_at(at("2026-01-13T12:00:00Z")) is None  # Tuesday
    assert o.next_boundary(at("2026-01-13T12:00:00Z")) == at("2026-01-19T08:00:00Z")


def test_a_weekend_window_spans_two_days() -> None:
    o = override("2026-01-10T00:00:00Z", "2026-01-12T00:00:00Z", 0, "Weekly")  # Sat-Sun
    assert o.window_at(at("2026-01-18T23:59:59Z")) is not None
    assert o.window_at(at("2026-01-19T00:00:00Z")) is None


# --- month ends and leap days --------------------------------------------------------------------


def test_monthly_on_the_31st_skips_short_months() -> None:
    o = override("2026-01-31T09:00:00Z", "2026-01-31T17:00:00Z", frequency="Monthly")
    starts = [b for b, _ in _take(o.windows_from(at("2026-01-01T00:00:00Z")), 7)]
    assert [s.date().isoformat() for s in starts] == [
        "2026-01-31",
        "2026-03-31",
        "2026-05-31",
        "2026-07-31",
        "2026-08-31",
        "2026-10-31",
        "2026-12-31",
    ]
    assert o.window_at(at("2026-02-28T12:00:00Z")) is None
    assert o.window_at(at("2026-03-01T12:00:00Z")) is None
    assert o.window_at(at("2026-03-31T12:00:00Z")) is not None
    # From inside March, before its 31st: March's own occurrence is next.
    assert o.next_boundary(at("2026-03-05T00:00:00Z")) == at("2026-03-31T09:00:00Z")


def test_monthly_on_the_30th_skips_only_february() -> None:
    o = override("2026-01-30T00:00:00Z", "2026-01-30T06:00:00Z", frequency="Monthly")
    windows = _take(o.windows_from(at("2026-01-31T00:00:00Z")), 2)
    starts = [b.date().isoformat() for b, _ in windows]
    assert starts == ["2026-03-30", "2026-04-30"]


def test_yearly_on_29_february_only_in_leap_years() -> None:
    o = override("2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z", frequency="Yearly")
    starts = [b.year for b, _ in _take(o.windows_from(at("2024-03-02T00:00:00Z")), 3)]
    assert starts == [2028, 2032, 2036]
    assert o.window_at(at("2025-02-28T12:00:00Z")) is None
    assert o.window_at(at("2028-02-29T12:00:00Z")) is not None


# --- until -------------------------------------------------------------------------------------


def test_until_is_the_last_moment_an_occurrence_may_start() -> None:
    o = override(
        "2026-01-05T09:00:00Z",
        "2026-01-05T17:00:00Z",
        frequency="Daily",
        until="2026-01-07T09:00:00Z",
    )
    assert o.window_at(at("2026-01-07T16:00:00Z")) is not None  # starts exactly at until
    assert o.window_at(at("2026-01-08T10:00:00Z")) is None
    assert o.next_boundary(at("2026-01-07T18:00:00Z")) is None
    early = override(
        "2026-01-05T09:00:00Z",
        "2026-01-05T17:00:00Z",
        frequency="Daily",
        until="2026-01-07T08:59:59Z",
    )
    assert early.window_at(at("2026-01-07T10:00:00Z")) is None
    assert early.window_at(at("2026-01-06T10:00:00Z")) is not None
    assert early.next_boundary(at("2026-01-06T18:00:00Z")) is None


def test_a_window_open_at_until_runs_to_its_end() -> None:
    o = override(
        "2026-01-05T09:00:00Z",
        "2026-01-05T17:00:00Z",
        frequency="Daily",
        until="2026-01-06T12:00:00Z",
    )
    assert o.window_at(at("2026-01-06T16:00:00Z")) is not None


# --- first wins, capped ------------------------------------------------------------------------


def test_the_first_open_override_wins_and_max_caps_it() -> None:
    nights = override("2026-01-05T18:00:00Z", "2026-01-06T08:00:00Z", 0, "Daily", source="a")
    days = override("2026-01-05T08:00:00Z", "2026-01-05T18:00:00Z", 9, "Daily", source="b")
    launch = override("2026-01-07T10:00:00Z", "2026-01-07T12:00:00Z", 5, source="c")
    overrides = [launch, nights, days]
    assert effective_minimum(1, 4, overrides, at("2026-01-07T11:00:00Z")).override == "c"
    noon = effective_minimum(1, 4, overrides, at("2026-01-06T12:00:00Z"))
    assert (noon.min_runners, noon.override) == (4, "b")  # 9 capped by maxRunners 4
    assert noon.next_change == at("2026-01-06T18:00:00Z")
    night = effective_minimum(1, 4, overrides, at("2026-01-06T23:00:00Z"))
    assert (night.min_runners, night.override) == (0, "a")
    none = effective_minimum(1, 4, [], at("2026-01-06T23:00:00Z"))
    assert (none.min_runners, none.override, none.next_change) == (1, "", None)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        effective_minimum(0, 1, [], datetime(2026, 1, 1))


# --- variants ----------------------------------------------------------------------------------


def test_a_variant_list_replaces_the_set_list_and_variants_filters_it() -> None:
    set_level = [
        {"startTime": "a", "variants": ["gpu"]},
        {"startTime": "b"},
    ]
    assert [p for p, _ in overrides_for_variant(set_level, None, "cpu", 0)] == [
        "spec.scheduledOverrides[1]"
    ]
    assert [p for p, _ in overrides_for_variant(set_level, None, "gpu", 1)] == [
        "spec.scheduledOverrides[0]",
        "spec.scheduledOverrides[1]",
    ]
    assert overrides_for_variant(set_level, [], "gpu", 1) == []
    own = overrides_for_variant(set_level, [{"startTime": "c"}], "gpu", 1)
    assert [p for p, _ in own] == ["spec.runnerVariants[1].scheduledOverrides[0]"]


def test_resolved_overrides_round_trip_through_json_shapes() -> None:
    window = {"startTime": "2026-01-05T09:00:00Z", "endTime": "2026-01-05T17:00:00Z"}
    spec = {
        "scheduledOverrides": [{**window, "minRunners": 2, "variants": ["cpu"]}],
        "runnerVariants": [
            {"name": "cpu"},
            {"name": "gpu"},
            {"name": "arm", "scheduledOverrides": [{**window, "minRunners": 1}]},
        ],
    }
    resolved = resolved_overrides(spec)
    assert sorted(resolved) == ["arm", "cpu"]
    assert "variants" not in resolved["cpu"][0]
    [parsed] = parse_resolved(resolved["arm"])
    assert parsed.source == "spec.runnerVariants[2].scheduledOverrides[0]"
    assert resolved_overrides({"runnerVariants": [{"name": "cpu"}]}) == {}
    assert list(resolved_overrides({"scheduledOverrides": [{**window, "minRunners": 1}]})) == [""]


# --- property: window_at agrees with an explicit enumeration -----------------------------------


def _take(it: Any, n: int) -> list[Any]:
    out = []
    for item in it:
        out.append(item)
        if len(out) == n:
            break
    return out


_OFFSETS = st.integers(min_value=-14 * 4, max_value=14 * 4).map(lambda q: timedelta(minutes=15 * q))


@settings(max_examples=300, deadline=None)
@given(
    start=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31)),
    offset=_OFFSETS,
    frequency=st.sampled_from(["", "Daily", "Weekly", "Monthly", "Yearly"]),
    length_fraction=st.floats(min_value=0.01, max_value=1.0),
    probe=st.timedeltas(min_value=timedelta(days=-40), max_value=timedelta(days=800)),
    until_after=st.one_of(
        st.none(), st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=600))
    ),
)
def test_window_at_matches_the_enumerated_occurrences(
    start: datetime,
    offset: timedelta,
    frequency: str,
    length_fraction: float,
    probe: timedelta,
    until_after: timedelta | None,
) -> None:
    zone = timezone(offset)
    begin = start.replace(tzinfo=zone, microsecond=0)
    period = {"": timedelta(days=3), "Daily": timedelta(days=1), "Weekly": timedelta(days=7)}
    longest = period.get(frequency, timedelta(days=28))
    seconds = int(longest.total_seconds() * length_fraction)
    length = max(timedelta(seconds=1), timedelta(seconds=seconds))
    raw: dict[str, Any] = {
        "startTime": format_time(begin),
        "endTime": format_time(begin + length),
        "minRunners": 1,
    }
    until = begin + until_after if until_after is not None and frequency else None
    if frequency:
        raw["recurrenceRule"] = {"frequency": frequency}
        if until is not None:
            raw["recurrenceRule"]["untilTime"] = format_time(until)
    o = parse_override(raw, "p")
    now = (begin + probe).astimezone(UTC)

    # The reference: walk every candidate from the first one.
    expected = None
    for k in range(2000):
        occurrence = o.occurrence(k)
        if occurrence is None:
            if not frequency:
                break
            continue
        if occurrence > now or (until is not None and occurrence > until):
            break
        if now < occurrence + length:
            expected = (occurrence, occurrence + length)
    assert o.window_at(now) == expected

    boundary = o.next_boundary(now)
    if boundary is not None:
        assert boundary > now
        # Nothing changes strictly between now and the boundary.
        middle = now + (boundary - now) / 2
        assert (o.window_at(middle) is None) == (expected is None)
