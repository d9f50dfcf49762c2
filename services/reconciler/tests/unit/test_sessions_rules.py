"""The ListenerSessionsOpen decision (pure): a variant whose newest session event is a failure
and whose session is not open now makes it False (reason per failure, the variant named); once
False, True only when every wanted variant's session is open (the sessions bucket, or its newest
event says so), whatever this reconciler forgot (ADR 0073); never failed: no condition. Without
the bucket the events alone decide (True once the listener said something newer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from arcflow.common.models.autoscaling_runner_set import Condition
from arcflow.reconciler.controllers.sessions_rules import (
    REASON_OPEN,
    REASON_OTHER,
    SessionState,
    decide,
    needs_open_sessions,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
WANTED = {"amd": 11, "arm": 12}


def _failed(
    variant: str, reason: str = "conflict", at: datetime = T0, scale_set_id: int = 0
) -> SessionState:
    return SessionState(variant, True, reason, "SessionConflictError: held", at, scale_set_id)


def _opened(variant: str, at: datetime) -> SessionState:
    return SessionState(variant, False, "", "", at)


def _condition(status: str, reason: str, message: str, at: datetime = T0) -> Condition:
    return Condition.model_validate(
        {
            "type": "ListenerSessionsOpen",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )


def test_a_set_that_never_failed_gets_no_condition() -> None:
    states = {v: _opened(v, T0) for v in WANTED}
    assert decide(None, states, WANTED, NOW) is None
    assert decide(None, {}, WANTED, NOW) is None


@pytest.mark.parametrize(
    ("reason", "condition_reason"),
    [
        ("conflict", "SessionConflict"),
        ("nil_session_id", "SessionRefused"),
        ("not_found", "ScaleSetNotFound"),
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
    verdict = decide(None, {"": _failed("")}, {"": 1}, NOW)
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
    verdict = decide(current, states, {"amd": 11}, NOW)
    assert verdict is not None
    assert verdict.ok


# --- level-based: which sessions are open now (ADR 0073) -----------------------------------

BOTH = "variant amd: the listener cannot open a message session (held); also failing: arm"


def test_a_failure_whose_session_is_open_now_does_not_count() -> None:
    """The failure was before the open (its ``session.opened`` not seen, or lost)."""
    assert decide(None, {"arm": _failed("arm")}, WANTED, NOW, {"arm"}) is None
    current = _condition("False", "SessionConflict", "variant arm: ...")
    verdict = decide(current, {"arm": _failed("arm")}, WANTED, NOW, {"amd", "arm"})
    assert verdict is not None
    assert (verdict.ok, verdict.reason) == (True, REASON_OPEN)


def test_forgotten_failure_keeps_it_false_when_another_variant_opens() -> None:
    """Restarted reconciler: it saw only amd open; arm has no session: still False, arm named
    with the condition's own text, amd no longer named."""
    arm_first = "variant arm: the listener cannot open a message session (held); also failing: amd"
    current = _condition("False", "SessionConflict", arm_first)
    states = {"amd": _opened("amd", NOW)}
    verdict = decide(current, states, WANTED, NOW, {"amd"})
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.since) == (False, "SessionConflict", T0)
    assert verdict.message == "variant arm: the listener cannot open a message session (held)"
    # Nothing in memory at all, the bucket says amd is open: the same.
    assert decide(current, {}, WANTED, NOW, {"amd"}) == verdict


def test_forgotten_failures_still_closed_keep_the_condition_as_it_is() -> None:
    current = _condition("False", "SessionConflict", BOTH)
    assert decide(current, {}, WANTED, NOW, set()) is None


def test_a_closed_variant_the_condition_does_not_name_is_said_plainly() -> None:
    current = _condition("False", "SessionConflict", "variant amd: ... (held)")
    verdict = decide(current, {}, WANTED, NOW, {"amd"})
    assert verdict is not None
    assert (verdict.ok, verdict.reason) == (False, REASON_OTHER)
    assert verdict.message == "variant arm: the listener has no message session open"


def test_every_session_open_turns_it_true_without_any_event() -> None:
    """Restarted reconciler, every fault cleared while it was down: the bucket alone."""
    current = _condition("False", "SessionConflict", BOTH)
    verdict = decide(current, {}, WANTED, NOW, {"amd", "arm"})
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.since) == (True, REASON_OPEN, NOW)


def test_an_open_event_counts_when_the_bucket_misses_it() -> None:
    current = _condition("False", "SessionConflict", "variant arm: ...")
    opened = T0 + timedelta(seconds=30)
    states = {"arm": _opened("arm", opened)}
    verdict = decide(current, states, WANTED, NOW, {"amd"})
    assert verdict is not None
    assert (verdict.ok, verdict.since) == (True, opened)


def test_the_bucket_never_turns_it_false_alone() -> None:
    """No failure reported: a set whose listener has not opened yet gets no condition."""
    assert decide(None, {}, WANTED, NOW, set()) is None
    current = _condition("True", REASON_OPEN, "every variant's listener session is open (2)")
    assert decide(current, {}, WANTED, NOW, set()) is None


def test_a_failure_of_an_older_scale_set_is_stale() -> None:
    """The ARS deleted while failing and created again with the same name: its new scale set
    (id 12) is not the failing one (id 7)."""
    assert decide(None, {"arm": _failed("arm", scale_set_id=7)}, WANTED, NOW) is None
    verdict = decide(None, {"arm": _failed("arm", scale_set_id=12)}, WANTED, NOW)
    assert verdict is not None
    assert not verdict.ok


def test_the_bucket_is_read_only_when_the_condition_needs_it() -> None:
    healthy = {v: _opened(v, T0) for v in WANTED}
    assert not needs_open_sessions(None, healthy, WANTED)
    assert not needs_open_sessions(None, {"arm": _failed("arm", scale_set_id=7)}, WANTED)
    assert needs_open_sessions(None, {"arm": _failed("arm")}, WANTED)
    assert needs_open_sessions(_condition("False", "SessionConflict", BOTH), {}, WANTED)
