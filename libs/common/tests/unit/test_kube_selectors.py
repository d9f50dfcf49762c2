"""Label selector parsing and matching (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common.kube import (
    LabelSelectorError,
    format_label_selector,
    parse_label_selector,
    selector_matches,
)

LABELS = {"app": "runner", "tier": "small"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("app=runner", True),
        ("app==runner", True),
        ("app=listener", False),
        ("app!=listener", True),
        ("missing!=x", True),
        ("tier in (small, large)", True),
        ("tier in (large)", False),
        ("tier notin (large)", True),
        ("missing notin (a)", True),
        ("tier notin (small)", False),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("app=runner,tier in (small),!missing", True),
        ("app=runner,tier=large", False),
        ("", True),
    ],
)
def test_operators(selector: str, matches: bool) -> None:
    assert selector_matches(parse_label_selector(selector), LABELS) is matches


@pytest.mark.parametrize("bad", ["app in ()", "app in (a", "a=b)", "=x", "app=b c", ",app"])
def test_bad_selectors_are_rejected_with_reason(bad: str) -> None:
    with pytest.raises(LabelSelectorError):
        parse_label_selector(bad)


def test_prefixed_keys() -> None:
    reqs = parse_label_selector("actions.github.com/scale-set-name=demo")
    assert selector_matches(reqs, {"actions.github.com/scale-set-name": "demo"})


_key = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_value = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)


@given(st.dictionaries(_key, _value, min_size=1, max_size=4))
def test_formatted_mapping_matches_itself(labels: dict[str, str]) -> None:
    reqs = parse_label_selector(format_label_selector(labels))
    assert selector_matches(reqs, labels)
    first = next(iter(labels))
    assert not selector_matches(reqs, {**labels, first: labels[first] + "x"})
