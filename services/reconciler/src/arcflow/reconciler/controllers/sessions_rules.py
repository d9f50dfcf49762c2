"""The ``ListenerSessionsOpen`` condition of an AutoscalingRunnerSet, decided (pure; ADR 0064,
amendment "Listener sessions"; level-based since ADR 0073).

Inputs: the condition as the ARS has it, the newest ``session.failed`` / ``session.opened``
this reconciler saw per variant, the variants the ARS wants with their scale set ids, and the
variants whose session is open now (the listener's sessions bucket; empty when it was not
read or cannot be). An event about another scale set id than the variant's current one (the
ARS deleted and created again, the set registered again) is stale and ignored.

A wanted variant whose newest event is a failure and whose session is not open now makes the
condition False (the first such variant by name gives the reason). Once False, it turns True
only when every wanted variant is open: its session is in the bucket, or its newest event is a
``session.opened`` newer than the condition's ``lastTransitionTime``. A variant that is neither
keeps it False even when this reconciler never saw its failure (it restarted since): what the
reconciler remembers can delay the condition, never turn it True while a session is missing.
A set that never failed gets no condition.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from arcflow.common.constants import CONDITION_LISTENER_SESSIONS, REASON_SCALE_SET_NOT_FOUND
from arcflow.common.models.autoscaling_runner_set import Condition
from arcflow.common.timestamps import parse_kube_time
from arcflow.reconciler.controllers.registration_rules import Verdict, says_false

CONDITION_SESSIONS: Final = CONDITION_LISTENER_SESSIONS
REASON_OPEN: Final = "SessionsOpen"
#: ``session.failed`` reason (the listener's metric label) -> condition reason.
REASONS: Final[Mapping[str, str]] = {
    "conflict": "SessionConflict",
    "nil_session_id": "SessionRefused",
    "not_found": REASON_SCALE_SET_NOT_FOUND,
    "error": "SessionError",
}
REASON_OTHER: Final = "SessionError"
ALSO: Final = "; also failing: "


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the condition needs of the newest session event of one variant."""

    variant: str
    failed: bool
    reason: str
    message: str
    occurred_at: datetime
    #: The scale set the event is about (0: not said; then it is taken as current).
    scale_set_id: int = 0


def variant_name(variant: str) -> str:
    return f"variant {variant}" if variant else "the default variant"


def _also(variants: Sequence[str]) -> str:
    return ALSO + ", ".join(v or "(default)" for v in variants) if variants else ""


def failure_message(failing: Sequence[SessionState]) -> str:
    first = failing[0]
    why = first.message or first.reason
    text = f"{variant_name(first.variant)}: the listener cannot open a message session ({why})"
    return text + _also([s.variant for s in failing[1:]])


def is_false(current: Condition | None) -> bool:
    return current is not None and current.status == "False"


def current_states(
    states: Mapping[str, SessionState], wanted: Mapping[str, int]
) -> dict[str, SessionState]:
    """The states of wanted variants about their current scale set (others are stale)."""
    return {
        v: s
        for v, s in states.items()
        if v in wanted and (not s.scale_set_id or not wanted[v] or s.scale_set_id == wanted[v])
    }


def needs_open_sessions(
    current: Condition | None,
    states: Mapping[str, SessionState],
    wanted: Mapping[str, int],
) -> bool:
    """Whether the pass must learn which sessions are open: the condition is False or a
    wanted variant's newest event is a failure. A healthy set needs no read."""
    return is_false(current) or any(s.failed for s in current_states(states, wanted).values())


def still_closed(current: Condition, closed: Sequence[str]) -> tuple[str, str]:
    """Reason and message of a False condition whose variants ``closed`` have no session and
    no failure this reconciler saw (it restarted since): the condition's own text for the
    variant it names first when that one is still closed, else a plain "no session open"."""
    text = current.message
    named = [v for v in closed if text.startswith(f"{variant_name(v)}: ")]
    if named:
        first = named[0]
        reason, why = current.reason or REASON_OTHER, text.split(ALSO, 1)[0]
    else:
        first = closed[0]
        reason = REASON_OTHER
        why = f"{variant_name(first)}: the listener has no message session open"
    return reason, why + _also([v for v in closed if v != first])


def decide(
    current: Condition | None,
    states: Mapping[str, SessionState],
    wanted: Mapping[str, int],
    now: datetime,
    open_now: Collection[str] | None = None,
) -> Verdict | None:
    """The condition to write, or ``None`` when the one the ARS has is right. ``open_now``:
    the wanted variants whose session is open now; ``None`` when that could not be read (the
    decision then rests on the events alone, as before ADR 0073)."""
    known = current_states(states, wanted)
    opened = frozenset(open_now or ())
    failing = sorted(
        (s for v, s in known.items() if s.failed and v not in opened), key=lambda s: s.variant
    )
    if failing:
        reason = REASONS.get(failing[0].reason, REASON_OTHER)
        message = failure_message(failing)
        if says_false(current, reason, message):
            return None
        since = min(s.occurred_at for s in failing)
        if current is not None and is_false(current):
            since = parse_kube_time(current.last_transition_time) or since  # still failing
        return Verdict(False, reason, message, min(since, now))
    if current is None or not is_false(current):
        return None
    said = [s.occurred_at for s in known.values() if not s.failed]
    newest = min(now, max(said)) if said else now
    if open_now is None:  # events alone: True once the listener said anything newer
        turned = parse_kube_time(current.last_transition_time)
        if not said or (turned is not None and newest < turned):
            return None
    else:
        closed = sorted(v for v in wanted if v not in opened and v not in known)
        if closed:
            reason, message = still_closed(current, closed)
            if says_false(current, reason, message):
                return None
            turned = parse_kube_time(current.last_transition_time) or now
            return Verdict(False, reason, message, min(turned, now))
    return Verdict(
        True, REASON_OPEN, f"every variant's listener session is open ({len(wanted)})", newest
    )
