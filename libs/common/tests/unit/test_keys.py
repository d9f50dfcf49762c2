"""The work queue's keys and a reconcile's result (arcflow.common.reconcile.keys)."""

from __future__ import annotations

from arcflow.common.reconcile.keys import Key, Result


def test_keys_order_by_kind_then_name_and_print_as_kind_namespace_name() -> None:
    keys = [Key("ers", "arc", "b"), Key("ars", "arc", "z"), Key("ers", "arc", "a")]
    assert sorted(keys) == [Key("ars", "arc", "z"), Key("ers", "arc", "a"), Key("ers", "arc", "b")]
    assert str(Key("er", "ns", "runner-1")) == "er:ns/runner-1"
    assert {Key("ars", "a", "b"), Key("ars", "a", "b")} == {Key("ars", "a", "b")}


def test_a_result_requeues_after_a_non_negative_delay_or_not_at_all() -> None:
    assert Result.done().requeue_after is None
    assert Result.again(2.5).requeue_after == 2.5
    assert Result.again(-1).requeue_after == 0.0
