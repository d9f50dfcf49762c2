"""The capacity board (ADR 0062): shares from statistics, and capacity headers that never let
the set's scale sets hold more than the budget, whatever the order of polls and answers."""

from __future__ import annotations

import pytest

from arcflow.common.capacity import SetCapacity, VariantCapacity
from arcflow.common.events import JobStatistics
from arcflow.common.listener_config import ListenerConfig
from arcflow.listener.capacity import CapacityBoard, capacity_board_of
from arcflow.listener.config import ConfigError, ScaleSetTarget


def target(name: str, max_runners: int = 40) -> ScaleSetTarget:
    return ScaleSetTarget(
        scale_set_id=hash(name) % 1000 + 1,
        namespace="ns",
        ars="set",
        variant=name,
        ephemeral_runner_set_name=f"set-{name}",
        min_runners=0,
        max_runners=max_runners,
        owner="host",
    )


def stats(assigned: int = 0, available: int = 0) -> JobStatistics:
    return JobStatistics(total_assigned_jobs=assigned, total_available_jobs=available)


def board(max_runners: int = 6, **variants: VariantCapacity) -> CapacityBoard:
    names = variants or {"a": VariantCapacity(), "b": VariantCapacity()}
    capacity = SetCapacity(
        max_runners=max_runners, variants={f"set-{n}": v for n, v in names.items()}
    )
    return CapacityBoard(capacity, [target(n) for n in names])


def test_no_raise_before_the_siblings_first_answer() -> None:
    b = board()
    b.observe("set-a", stats())
    b.observe("set-b", stats())
    # b has never been answered: it may hold up to its maxRunners, so a gets nothing yet.
    _, first_a = b.grant("set-a")
    assert first_a == 0
    poll_b, first_b = b.grant("set-b")
    assert first_b == 0
    b.answered("set-b", poll_b)
    assert b.changed("set-a").is_set()  # a's poll in flight carries 0: poll again
    _, second_a = b.grant("set-a")
    assert second_a == 3  # b answered at 0; a may take its share


def test_a_raise_waits_for_the_lowered_sibling_to_be_answered() -> None:
    b = board()
    b.observe("set-a", stats())
    b.observe("set-b", stats())
    pa, _ = b.grant("set-a")
    pb, _ = b.grant("set-b")
    b.answered("set-a", pa)
    b.answered("set-b", pb)
    pa, ca = b.grant("set-a")
    pb, cb = b.grant("set-b")
    assert (ca, cb) == (3, 3)
    b.answered("set-a", pa)
    b.answered("set-b", pb)
    pa, _ = b.grant("set-a")
    pb, _ = b.grant("set-b")
    # b gets demand: a's headroom goes to b, but b may rise only once a's lower poll answered.
    b.observe("set-b", stats(assigned=3, available=3))
    assert b.share("set-b") == 6
    assert b.share("set-a") == 0
    assert b.changed("set-a").is_set()  # lower at once
    assert not b.changed("set-b").is_set()  # a may still hold 3 on the server: b stays at 3
    pa2, lowered = b.grant("set-a")
    assert lowered == 0
    assert b.grant("set-b")[1] == 3  # a's lower poll sent, not answered: still 3
    b.answered("set-a", pa2)
    assert b.changed("set-b").is_set()
    assert b.grant("set-b")[1] == 6


def test_the_sum_of_possibly_held_capacities_stays_within_the_budget() -> None:
    b = board(
        max_runners=5, a=VariantCapacity(priority=2), b=VariantCapacity(), c=VariantCapacity()
    )
    names = ["set-a", "set-b", "set-c"]
    held = dict.fromkeys(names, 40)  # unknown at start: anything up to maxRunners
    sent: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    demands = [(0, 4), (2, 9), (1, 0), (0, 0), (3, 3), (1, 8)]
    for step in range(60):
        name = names[step % 3]
        assigned, available = demands[(step * 7) % len(demands)]
        b.observe(name, stats(min(assigned, 2), available))
        poll, capacity = b.grant(name)
        sent[name].append((poll, capacity))
        if step % 2 == 0:  # answer the oldest outstanding poll of some variant
            other = names[(step // 2) % 3]
            if sent[other]:
                answered_poll, answered_cap = sent[other].pop(0)
                b.answered(other, answered_poll)
                held[other] = answered_cap
        possible = {
            n: max([held[n], *(c for _, c in sent[n])]) if held[n] != 40 or sent[n] else 40
            for n in names
        }
        known = [n for n in names if held[n] != 40]
        if len(known) == 3:
            assert sum(possible.values()) <= 5, (step, possible)


def test_drain_advertises_zero_and_keeps_committed_jobs() -> None:
    b = board(a=VariantCapacity(drain=True), b=VariantCapacity())
    b.observe("set-a", stats(assigned=2, available=5))
    b.observe("set-b", stats())
    assert b.runner_cap("set-a") == 2
    assert b.grant("set-a")[1] == 0
    report = b.report("set-a")
    assert (report.share, report.advertised, report.drain) == (2, 0, True)
    assert report.total == {"runners": "6"}


def test_config_without_capacity_has_no_board_and_a_bad_one_is_a_config_error() -> None:
    assert capacity_board_of(ListenerConfig(), [target("a")]) is None
    bad = ListenerConfig(capacity={"resources": {"cpu": "-1"}})
    with pytest.raises(ConfigError, match="capacity"):
        capacity_board_of(bad, [target("a")])


def test_shares_are_exported_as_metrics() -> None:
    from arcflow.listener.metrics import ListenerMetrics, capacity_metric_specs

    metrics = ListenerMetrics(capacity_metric_specs())
    recorder = metrics.recorder_for("https://github.com/octo", "set-a", "ci")
    recorder.record_capacity(3, 0, {"runners": 6.0, "cpu": 24.0}, {"runners": 5.0, "cpu": 20.0})
    text = metrics.exposition().decode()
    assert "arcflow_listener_capacity_share{" in text
    assert 'budget="cpu"' in text
    line = next(
        x
        for x in text.splitlines()
        if x.startswith("arcflow_listener_capacity_used") and "cpu" in x
    )
    assert line.endswith(" 20.0")
