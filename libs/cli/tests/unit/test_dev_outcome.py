"""``arcflow dev``'s last line on stderr: completed, interrupted, or why no job ran."""

from __future__ import annotations

from typing import Any

from arcflow.cli.dev import demo_outcome


def _summary(total: int, completed: int, *, interrupted: bool, blocked: list[str]) -> Any:
    return {
        "jobs": {"requested": 12, "total": total, "completed": completed, "failed": 0},
        "interrupted": interrupted,
        "blocked_by": blocked,
    }


def test_ctrl_c_before_the_demo_says_interrupted() -> None:
    assert demo_outcome(_summary(0, 0, interrupted=True, blocked=[])) == (
        "demo jobs: interrupted before the demo started (none queued)"
    )


def test_ctrl_c_during_the_demo_says_how_far_it_got() -> None:
    assert demo_outcome(_summary(12, 5, interrupted=True, blocked=[])) == (
        "demo jobs: interrupted: 5/12 completed, 0 failed"
    )


def test_blocked_and_complete() -> None:
    blocked = demo_outcome(_summary(0, 0, interrupted=False, blocked=["pod runner"]))
    assert blocked.startswith("demo jobs: none queued")
    assert demo_outcome(_summary(12, 12, interrupted=False, blocked=[])) == (
        "demo jobs: 12/12 completed, 0 failed"
    )
