"""Kubernetes timestamps read leniently: missing or malformed is None, no offset is UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from arcflow.common.timestamps import parse_kube_time


def test_a_kubernetes_timestamp_is_an_aware_utc_time() -> None:
    assert parse_kube_time("2026-12-01T10:00:00Z") == datetime(2026, 12, 1, 10, tzinfo=UTC)


def test_an_offset_is_kept_and_a_missing_one_is_utc() -> None:
    east = parse_kube_time("2026-12-01T11:00:00+01:00")
    assert east == datetime(2026, 12, 1, 11, tzinfo=timezone(timedelta(hours=1)))
    assert east == parse_kube_time("2026-12-01T10:00:00Z")
    assert parse_kube_time("2026-12-01T10:00:00") == datetime(2026, 12, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize("value", [None, "", "yesterday", 1733047200, "2026-13-01T00:00:00Z"])
def test_missing_or_malformed_values_are_none(value: object) -> None:
    assert parse_kube_time(value) is None
