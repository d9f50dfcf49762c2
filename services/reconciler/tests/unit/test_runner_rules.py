"""The EphemeralRunner rules: upstream's failure backoff."""

from __future__ import annotations

from datetime import UTC, datetime

from arcflow.reconciler.controllers.runner_rules import backoff_remaining


def test_failure_backoff() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert backoff_remaining({}, now) == 0
    assert backoff_remaining({"u1": "2026-01-01T00:00:08Z"}, now) == 3.0  # 5 s after 1 failure
