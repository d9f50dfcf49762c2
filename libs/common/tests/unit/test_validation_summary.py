"""Condition messages, Events and log lines name at most ten problems and count the rest."""

from __future__ import annotations

from arcflow.common.validation import FieldError, summarize


def test_a_few_problems_are_all_named() -> None:
    problems = [FieldError("spec.a", "bad"), FieldError("spec.b", "worse")]
    assert summarize(problems) == "spec.a: bad; spec.b: worse"


def test_hundreds_of_problems_give_a_bounded_message() -> None:
    problems = [FieldError(f"spec.runnerVariants[{i}].name", "x" * 100) for i in range(200)]
    message = summarize(problems)
    assert message.count("spec.runnerVariants[") == 10
    assert message.endswith("(and 190 more)")
    assert len(message) < 2_000
