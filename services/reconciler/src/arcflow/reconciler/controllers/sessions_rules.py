"""The ``ListenerSessionsOpen`` condition of an AutoscalingRunnerSet, decided (pure; ADR 0064,
amendment "Listener sessions").

Inputs: the condition as the ARS has it, the newest ``session.failed`` / ``session.opened``
the listener published per variant, and the variants the ARS wants. A variant whose newest
event is a failure makes the condition False (the first such variant by name gives the
reason). It turns True only when no wanted variant is failing and the listener said something
newer than the condition's ``lastTransitionTime``. A set that never failed gets no condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from arcflow.common.timestamps import parse_kube_time
from arcflow.reconciler.controllers.registration_rules import Verdict, says_false

CONDITION_SESSIONS: Final = "ListenerSessionsOpen"
REASON_OPEN: Final = "SessionsOpen"
#: ``session.failed`` reason (the listener's metric label) -> condition reason.
REASONS: Final[Mapping[str, str]] = {
    "conflict": "SessionConflict",
    "nil_session_id": "SessionRefused",
    "error": "SessionError",
}
REASON_OTHER: Final = "SessionError"


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the condition needs of the newest session event of one variant."""

    variant: str
    failed: bool
    reason: str
    message: str
    occurred_at: datetime


def variant_name(variant: str) -> str:
    return f"variant {variant}" if variant else "the default variant"


def failure_message(failing: Sequence[SessionState]) -> str:
    first = failing[0]
    why = first.message or first.reason
    text = f"{variant_name(first.variant)}: the listener cannot open a message session ({why})"
    if len(failing) > 1:
        others = ", ".join(s.variant or "(default)" for s in failing[1:])
        text += f"; also failing: {others}"
    return text


def decide(
    current: Mapping[str, Any] | None,
    states: Mapping[str, SessionState],
    wanted: Sequence[str],
    now: datetime,
) -> Verdict | None:
    """The condition to write, or ``None`` when the one the ARS has is right."""
    failing = sorted(
        (s for v, s in states.items() if v in wanted and s.failed), key=lambda s: s.variant
    )
    if failing:
        reason = REASONS.get(failing[0].reason, REASON_OTHER)
        message = failure_message(failing)
        if says_false(current, reason, message):
            return None
        since = min(s.occurred_at for s in failing)
        if current is not None and current.get("status") == "False":
            since = parse_kube_time(current.get("lastTransitionTime")) or since  # still failing
        return Verdict(False, reason, message, min(since, now))
    if current is None or current.get("status") != "False" or not states:
        return None
    newest = max(s.occurred_at for s in states.values())
    turned = parse_kube_time(current.get("lastTransitionTime"))
    if turned is not None and newest < turned:
        return None
    return Verdict(
        True,
        REASON_OPEN,
        f"every variant's listener session is open ({len(wanted)})",
        min(now, newest),
    )
