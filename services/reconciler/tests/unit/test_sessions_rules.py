"""The ListenerSessionsOpen decision (pure): a variant whose newest session event is a failure
makes it False (reason per failure, the variant named); True only once no wanted variant fails
and the listener said something after the condition turned; never failed: no condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from arcflow.reconciler.controllers.sessions_rules import (
    REASON_OPEN,
    SessionState,
    decide,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
WANTED = ["amd", "arm"]


def _failed(variant: str, reason: str = "conflict", at: datetime = T0) -> SessionState:
    return SessionState(variant, True, reason, "SessionConflictError: held", at)


def _opened(variant: str, at: datetime) -> SessionState:
    return SessionState(variant, False, "", "", at)


def _condition(status: str, reason: str, message: str, at: datetime = T0) -> dict[str, str]:
    return {
        "type": "ListenerSessionsOpen",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_a_set_that_never_failed_gets_no_condition() -> None:
    states = {v: _opened(v, T0) for v in WANTED}
    assert decide(None, states, WANTED, NOW) is None
    assert decide(None, {}, WANTED, NOW) is None


@pytest.mark.parametrize(
    ("reason", "condition_reason"),
    [
        ("conflict", "SessionConflict"),
        ("nil_session_id", "SessionRefused"),
        ("error", "SessionError"),
        ("something new", "SessionError"),
    ],
)
def test_a_failing_variant_turns_it_false_naming_the_variant(
    reason: str, condition_reason: str
) -> None:
    states = {"amd": _opened("amd", T0), "arm": _failed("arm", reason)}
    verdict = decide(None, states, WANTED, NOW)
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.since) == (False, condition_reason, T0)
    assert verdict.message.startswith("variant arm: ")
    assert "SessionConflictError: held" in verdict.message


def test_the_same_failure_again_writes_nothing() -> None:
    states = {"arm": _failed("arm")}
    first = decide(None, states, WANTED, NOW)
    assert first is not None
    current = _condition("False", first.reason, first.message)
    assert decide(current, states, WANTED, NOW) is None


def test_a_second_failing_variant_is_named_and_keeps_the_transition_time() -> None:
    current = _condition("False", "SessionConflict", "variant arm: ...")
    states = {"arm": _failed("arm"), "amd": _failed("amd", "error", T0 + timedelta(minutes=1))}
    verdict = decide(current, states, WANTED, NOW)
    assert verdict is not None
    assert verdict.reason == "SessionError"  # the first by name: amd
    assert verdict.message.startswith("variant amd: ")
    assert "also failing: arm" in verdict.message
    assert verdict.since == T0


def test_default_variant_is_named_as_such() -> None:
    verdict = decide(None, {"": _failed("")}, [""], NOW)
    assert verdict is not None
    assert verdict.message.startswith("the default variant: ")


def test_open_again_turns_it_true_once() -> None:
    current = _condition("False", "SessionConflict", "variant arm: ...")
    opened = T0 + timedelta(seconds=30)
    states = {"amd": _opened("amd", T0 - timedelta(minutes=1)), "arm": _opened("arm", opened)}
    verdict = decide(current, states, WANTED, NOW)
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.since) == (True, REASON_OPEN, opened)
    assert decide(_condition("True", REASON_OPEN, verdict.message), states, WANTED, NOW) is None


def test_false_stays_without_anything_newer_than_it() -> None:
    """A restarted reconciler holding only events older than the condition keeps it False."""
    current = _condition("False", "SessionConflict", "variant arm: ...", at=T0)
    states = {"amd": _opened("amd", T0 - timedelta(minutes=1))}
    assert decide(current, states, WANTED, NOW) is None
    assert decide(current, {}, WANTED, NOW) is None


def test_a_removed_variant_no_longer_counts() -> None:
    current = _condition("False", "SessionConflict", "variant gone: ...")
    states = {"gone": _failed("gone"), "amd": _opened("amd", T0 + timedelta(seconds=5))}
    verdict = decide(current, states, ["amd"], NOW)
    assert verdict is not None
    assert verdict.ok
