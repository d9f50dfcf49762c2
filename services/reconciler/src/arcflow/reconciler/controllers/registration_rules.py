"""The ``ScaleSetsRegistered`` condition of an AutoscalingRunnerSet, decided (pure; ADR 0064).

Inputs are what the reconciler already holds: the condition as the ARS has it (its model),
the newest ``registration.failed`` the registrar published for the ARS, and the registrar's
records of its wanted variants (when each was last written). A failure stands until a record
is written after it; the condition's ``lastTransitionTime`` is when the failure happened, so a
record written between the failure and the reconciler seeing it still clears it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from arcflow.common.models.autoscaling_runner_set import Condition
from arcflow.common.timestamps import parse_kube_time

CONDITION_REGISTERED: Final = "ScaleSetsRegistered"
REASON_REGISTERED: Final = "Registered"
#: ``registration.failed`` kind -> condition reason.
REASONS: Final[Mapping[str, str]] = {
    "unreachable": "GitHubUnreachable",
    "refused": "CredentialsRefused",
    "credentials": "CredentialsUnusable",
    "connection": "ServerConnectionInvalid",
    "scale_set_gone": "ScaleSetDeletedOnGitHub",
    "rejected": "RegistrationRejected",
}
REASON_FAILED: Final = "RegistrationFailed"


@dataclass(frozen=True, slots=True)
class Failure:
    """What the condition needs of a ``registration.failed`` event."""

    variant: str
    kind: str
    reason: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str
    message: str
    since: datetime


def says_false(current: Condition | None, reason: str, message: str) -> bool:
    """The condition the ARS has is already False with this reason and message."""
    return (
        current is not None
        and current.status == "False"
        and current.reason == reason
        and current.message == message
    )


def failure_message(failure: Failure) -> str:
    where = f"variant {failure.variant}: " if failure.variant else ""
    return f"{where}{failure.reason}"


def is_current(failure: Failure, written: Mapping[str, datetime]) -> bool:
    """Whether no record the failure is about was written after it."""
    last = written.get(failure.variant) if failure.variant else max(written.values(), default=None)
    return last is None or failure.occurred_at > last


def decide(
    current: Condition | None,
    failure: Failure | None,
    wanted: Sequence[str],
    written: Mapping[str, datetime],
    now: datetime,
) -> Verdict | None:
    """The condition to write, or ``None`` when the one the ARS has is right.

    ``written``: variant -> when its record was last written, for the wanted variants that
    have one. A set that never failed gets no condition (nothing to say, nothing written)."""
    if failure is not None and is_current(failure, written):
        reason = REASONS.get(failure.kind, REASON_FAILED)
        message = failure_message(failure)
        if says_false(current, reason, message):
            return None
        return Verdict(False, reason, message, failure.occurred_at)
    if current is None or current.status != "False":
        return None
    if not wanted or any(v not in written for v in wanted):
        return None
    since = parse_kube_time(current.last_transition_time)
    newest = max(written.values())
    if since is not None and newest < since:
        return None
    return Verdict(
        True,
        REASON_REGISTERED,
        f"every variant has its runner scale set ({len(wanted)})",
        min(now, max(newest, since or newest)),
    )
