"""The test-only crash switch: off unless the environment asks, clear error on a bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcflow.listener.pump import CRASH_AFTER_PUBLISH_ENV, CRASH_BARRIER_ENV, CrashAfterPublish
from arcflow.listener.supervisor import FatalError


def test_off_by_default() -> None:
    assert CrashAfterPublish.from_environ({}) is None
    assert CrashAfterPublish.from_environ({CRASH_AFTER_PUBLISH_ENV: "  "}) is None
    # A barrier alone does nothing: only the count switches the crash on.
    assert CrashAfterPublish.from_environ({CRASH_BARRIER_ENV: "/tmp/x"}) is None


def test_count_and_barrier() -> None:
    assert CrashAfterPublish.from_environ({CRASH_AFTER_PUBLISH_ENV: "3"}) == CrashAfterPublish(3)
    switch = CrashAfterPublish.from_environ(
        {CRASH_AFTER_PUBLISH_ENV: "1", CRASH_BARRIER_ENV: "/tmp/barrier"}
    )
    assert switch == CrashAfterPublish(1, Path("/tmp/barrier"))


@pytest.mark.parametrize("raw", ["0", "-2", "one", "1.5"])
def test_a_bad_count_is_a_fatal_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(FatalError, match=f"{CRASH_AFTER_PUBLISH_ENV} must be a positive integer"):
        CrashAfterPublish.from_environ({CRASH_AFTER_PUBLISH_ENV: raw})
