"""The reconciler's key kinds and the order its queue takes them in (Key and Result
themselves: libs/common/tests/unit/test_keys.py)."""

from __future__ import annotations

from arcflow.common.reconcile import keys as common_keys
from arcflow.reconciler.keys import KINDS, PRIORITY, Key


def test_listeners_are_taken_first_and_runners_last() -> None:
    assert sorted(KINDS, key=PRIORITY.__getitem__) == ["al", "ars", "ers", "er"]


def test_the_reconcilers_keys_are_the_common_ones() -> None:
    assert Key("ars", "ns", "a") == common_keys.Key("ars", "ns", "a")
    assert isinstance(Key("er", "ns", "r"), common_keys.Key)
