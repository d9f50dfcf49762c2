"""One decision whether an error is worth retrying: the error carries it."""

from __future__ import annotations

import pytest

from arcflow.common.actions.errors import ActionsError, RetriesExhaustedError, RunnerExistsError
from arcflow.common.errors import TerminalError, is_retryable, is_terminal
from arcflow.common.kube import ConflictError, InvalidError


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (ActionsError("no answer", status=0), True),
        (ActionsError("throttled", status=429), True),
        (ActionsError("down", status=503), True),
        (ActionsError("not implemented", status=501), False),
        (ActionsError("bad request", status=400), False),
        (RunnerExistsError("exists", status=409), False),
        (RetriesExhaustedError("gave up", status=400), True),
        (InvalidError("spec: invalid", status=422), False),
        (TerminalError("never"), False),
        (ValueError("unknown"), False),
    ],
)
def test_retryability_travels_on_the_error(error: BaseException, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_terminal_marker() -> None:
    assert is_terminal(InvalidError("x", status=422))
    assert not is_terminal(ConflictError("x", status=409))
