"""The pure manifest helpers the controllers and the rules share."""

from __future__ import annotations

from arcflow.reconciler.controllers.manifest import merge_patch_to


def test_merge_patch_to_nulls_removed_keys() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"a": 1, "b": {"c": 5}, "e": [2], "f": True}
    assert merge_patch_to(old, new) == {"b": {"c": 5, "d": None}, "e": [2], "f": True}
