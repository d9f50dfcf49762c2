"""The event envelope (``arcflow.common.events.envelope``): frozen, UTC-only, tolerant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from arcflow.common.events.envelope import EventBase, EventKeys, new_event_id, utc_now


def test_times_are_aware_and_normalised_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    event = EventBase(
        type="t", source="tests", occurred_at=datetime(2026, 1, 1, 12, tzinfo=plus_two)
    )
    assert event.occurred_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert event.occurred_at.tzinfo is UTC
    assert utc_now().tzinfo is UTC


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        EventBase(type="t", source="tests", occurred_at=datetime(2026, 1, 1, 12))


def test_unknown_fields_are_ignored_and_the_model_is_frozen() -> None:
    event = EventBase.model_validate({"type": "t", "source": "tests", "added_later": 1})
    assert not hasattr(event, "added_later")
    with pytest.raises(ValidationError):
        event.source = "other"  # type: ignore[misc]


def test_every_event_gets_its_own_id_and_no_dedup_key_by_default() -> None:
    first, second = EventBase(type="t", source="s"), EventBase(type="t", source="s")
    assert first.id != second.id
    assert len(new_event_id()) == 36
    assert first.dedup_key() is None


def test_a_source_is_required() -> None:
    with pytest.raises(ValidationError):
        EventBase(type="t", source="")
    assert EventBase(type="t", source="s").keys == EventKeys()
