"""The reason a ``session.failed`` event gives (the listener's metric label and the cue the
ARS condition carries to the registrar), from what the session create raised."""

from __future__ import annotations

import pytest

from arcflow.common.actions import ScaleSetNotFoundError, SessionConflictError
from arcflow.listener.pump import session_failure_reason


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ScaleSetNotFoundError("The runner scale set 3 does not exist.", status=404), "not_found"),
        (SessionConflictError("held", status=409), "conflict"),
        (RuntimeError("boom"), "error"),
    ],
)
def test_the_reason_names_what_github_answered(exc: BaseException, reason: str) -> None:
    assert session_failure_reason(exc) == reason
