"""RFC 7386 merge patch and RFC 6902 JSON patch (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.devstack.kube_emulator.patching import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
)


def test_merge_patch_rfc_examples() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": "b"}, ["c"]) == ["c"]
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}}  # input untouched


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(st.dictionaries(st.text(max_size=3), json_values, max_size=4))
def test_merge_patch_with_itself_minus_nulls_is_idempotent(doc: dict[str, object]) -> None:
    once = merge_patch({}, doc)
    assert merge_patch(once, doc) == once


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "x": 1}
    result = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "remove", "path": "/x"},
            {"op": "replace", "path": "/a/b/1", "value": 10},
            {"op": "copy", "from": "/a/b", "path": "/c"},
            {"op": "move", "from": "/c", "path": "/d"},
            {"op": "add", "path": "/e~1f", "value": "slash"},
            {"op": "test", "path": "/d", "value": [0, 10, 2, 3]},
        ],
    )
    assert result == {"a": {"b": [0, 10, 2, 3]}, "d": [0, 10, 2, 3], "e/f": "slash"}
    assert doc == {"a": {"b": [1, 2]}, "x": 1}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/a/b/9", "value": 1}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
        {"op": "add"},
    ],
)
def test_json_patch_errors(ops: object) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": {"b": []}}, ops)


def test_json_patch_failed_test() -> None:
    with pytest.raises(PatchTestFailed):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
