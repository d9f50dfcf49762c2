"""The EphemeralRunner rules: upstream's failure backoff, the registration written along."""

from __future__ import annotations

from datetime import UTC, datetime

from arcflow.reconciler.controllers.runner_rules import (
    Registration,
    backoff_remaining,
    registration_status,
)


def test_failure_backoff() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert backoff_remaining({}, now) == 0
    assert backoff_remaining({"u1": "2026-01-01T00:00:08Z"}, now) == 3.0  # 5 s after 1 failure


def test_a_registration_is_written_as_the_status_fields_upstream_uses() -> None:
    registration = Registration(42, "runner-abc")
    assert registration.status() == {"runnerId": 42, "runnerName": "runner-abc"}
    assert registration_status(registration) == registration.status()
    assert registration_status(None) == {}
