"""Whether an error is worth retrying, decided in one place (issue 13 item 6).

An error says it itself: a :class:`TerminalError` (a marker, as controller-runtime's terminal
error) never is; an error with a boolean ``retryable`` attribute (the Actions client's errors:
transport failures, 429 and 5xx but 501) says so; anything else is not. The registrar's
converge asks :func:`is_retryable`; the reconciler's work queue asks :func:`is_terminal`
(a level-triggered reconcile retries every other error with backoff: ADR 0050). Nothing else
decides.
"""

from __future__ import annotations


class TerminalError(Exception):
    """Retrying the same work cannot succeed: the input must change first (a new event)."""


def is_terminal(exc: BaseException) -> bool:
    return isinstance(exc, TerminalError)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, TerminalError):
        return False
    retryable = getattr(exc, "retryable", None)
    return retryable if isinstance(retryable, bool) else False
