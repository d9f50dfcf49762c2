"""The controller runtime builds routing, queue, adapters and state from a declaration
(ADR 0095): a change wakes its own key, its owner's and a watch's targets; an own write routes
like a watch event; a declared event wakes its targets and is kept; bad declarations fail at
construction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from arcflow.common.cache import CachedKind, Change
from arcflow.common.kube.resources import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
)
from arcflow.common.reconcile.declare import Controller, Controllers, OnEvent, Watch
from arcflow.common.reconcile.keys import Key, Result
from arcflow.common.reconcile.manager import Manager


@dataclass
class Memo:
    seen: list[str] = field(default_factory=list)


@dataclass
class Said:
    at: datetime
    ars: str
    variant: str = ""

    @property
    def occurred_at(self) -> datetime:
        return self.at


async def _reconcile(ctx: Any, obj: Any) -> Result:
    return Result.done()


async def _read(ctx: Any, resource: Any, key: Any) -> dict[str, Any] | None:
    return None


async def _unparsable(ctx: Any, doc: Any, error: Any) -> None:
    return None


def _label(obj: Any, _lookup: Any) -> list[tuple[str, str]]:
    labels = obj["metadata"].get("labels", {})
    return [(obj["metadata"]["namespace"], labels["ars"])] if "ars" in labels else []


def _said_targets(event: Said) -> list[tuple[str, str]]:
    return [("ns", event.ars)]


def _said_group(event: Said) -> tuple[str, str]:
    return event.ars, event.variant


DECLARED = Controllers(
    (
        Controller(
            "ars",
            AUTOSCALING_RUNNER_SET,
            dict,
            _reconcile,
            watches=(Watch(EPHEMERAL_RUNNER_SET.kind, _label, "label"),),
            events=(
                OnEvent((Said,), lambda e: [("ns", e.ars)], keep=lambda e: (e.ars, e.variant)),
            ),
            state=(Memo,),
            priority=1,
        ),
        Controller(
            "er",
            EPHEMERAL_RUNNER,
            dict,
            _reconcile,
            owns=(POD.kind,),
            state=(Memo,),
            priority=0,
        ),
    ),
    read=_read,
    on_unparsable=_unparsable,
)


def _obj(kind: str, name: str, **meta: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"namespace": "ns", "name": name, **meta}}


def test_a_change_wakes_its_own_key_its_owner_and_a_watchs_targets() -> None:
    manager = Manager(DECLARED, lambda _m: None)
    pod = _obj("Pod", "p", ownerReferences=[{"kind": "EphemeralRunner", "name": "r"}])
    assert manager.keys_for("Pod", pod) == [Key("er", "ns", "r")]
    other = _obj("Pod", "q", ownerReferences=[{"kind": "ReplicaSet", "name": "rs"}])
    assert manager.keys_for("Pod", other) == []
    ers = _obj("EphemeralRunnerSet", "s", labels={"ars": "a"})
    assert manager.keys_for("EphemeralRunnerSet", ers) == [Key("ars", "ns", "a")]
    assert manager.keys_for("EphemeralRunner", _obj("EphemeralRunner", "r")) == [
        Key("er", "ns", "r")
    ]
    assert manager.keys_for("ConfigMap", _obj("ConfigMap", "c")) == []


def test_an_own_write_applied_to_the_cache_queues_what_it_concerns() -> None:
    kinds = [
        CachedKind(k) for k in (AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET, EPHEMERAL_RUNNER, POD)
    ]
    manager = Manager(DECLARED, lambda _m: None, kube=object(), cached=kinds)  # type: ignore[arg-type]
    assert manager.cache is not None
    runner = _obj("EphemeralRunner", "r", resourceVersion="5")
    manager.cache.observe_write(runner)
    assert manager.queue.is_waiting(Key("er", "ns", "r"))
    manager._changed(Change("Pod", "DELETED", _obj("Pod", "p")))  # no owner: nothing


def test_a_declared_event_wakes_its_targets_and_the_newest_is_kept() -> None:
    manager = Manager(DECLARED, lambda _m: None)
    now = datetime.now(UTC)
    new, old = Said(now, "a", "gpu"), Said(now - timedelta(seconds=1), "a", "gpu")
    assert manager.keys_for_event(new) == [Key("ars", "ns", "a")]
    manager.keys_for_event(old)
    assert manager.kept.group("a") == {"gpu": new}
    assert manager.keys_for_event("not declared") == []


def test_state_is_one_object_per_class_and_undeclared_state_is_refused() -> None:
    memo = Memo()
    manager = Manager(DECLARED, lambda m: m.state(Memo), states={Memo: memo})
    assert manager.context is memo
    assert manager.state(Memo) is memo
    with pytest.raises(ValueError, match="no controller declares"):
        Manager(DECLARED, lambda _m: None, states={int: 1})


def test_a_routed_kind_the_cache_does_not_watch_is_refused() -> None:
    with pytest.raises(ValueError, match="routed but never watched"):
        Manager(DECLARED, lambda _m: None, kube=object(), cached=[CachedKind(POD)])  # type: ignore[arg-type]


async def _settles_then_own_change_at_once(
    controller: Controller[Any, Any], child: Callable[[int], dict[str, Any]], target: str
) -> None:
    """Twenty changes routed to ``target`` by a route that settles 0.3 s wake it once, that
    long after the first; a change of the target itself wakes it at once."""
    declared = Controllers((controller,), read=_read, on_unparsable=_unparsable)
    loop = asyncio.get_running_loop()
    passes: list[float] = []

    async def run(ctx: Any, key: Key[Any], call: Any) -> Result:
        passes.append(loop.time())
        return Result.done()

    manager = Manager(declared, lambda _m: None, run=run)
    kind = controller.resource.kind
    manager.queue.start()
    try:
        first = loop.time()
        for index in range(20):
            changed_child = child(index)
            manager._changed(Change(changed_child["kind"], "MODIFIED", changed_child))
        assert manager.queue.is_busy(Key(controller.kind, "ns", target))
        await manager.queue.wait_idle(5)
        assert len(passes) == 1
        assert passes[0] - first >= 0.3

        changed = loop.time()
        manager._changed(Change(kind, "MODIFIED", _obj(kind, target)))
        await manager.queue.wait_idle(5)
        assert len(passes) == 2
        assert passes[1] - changed < 0.3
    finally:
        await manager.queue.stop()


async def test_an_owned_change_settles_where_the_owner_says_so_and_its_own_does_not() -> None:
    """An owned kind's changes wake an owner that declares ``owned_settle_seconds`` once, that
    long after the first; a change of the owner itself wakes it at once."""
    owner = [{"kind": "EphemeralRunnerSet", "name": "s"}]
    await _settles_then_own_change_at_once(
        Controller(
            "ers",
            EPHEMERAL_RUNNER_SET,
            dict,
            _reconcile,
            owns=(EPHEMERAL_RUNNER.kind,),
            owned_settle_seconds=0.3,
        ),
        lambda index: _obj("EphemeralRunner", f"r{index}", ownerReferences=owner),
        "s",
    )


async def test_a_watched_change_settles_where_the_watch_says_so() -> None:
    """A watch that declares ``settle_seconds`` wakes its target once, that long after the
    first of a run of changes; the target's own change wakes it at once (ADR 0123)."""
    await _settles_then_own_change_at_once(
        Controller(
            "ars",
            AUTOSCALING_RUNNER_SET,
            dict,
            _reconcile,
            watches=(Watch(EPHEMERAL_RUNNER_SET.kind, _label, "label", settle_seconds=0.3),),
        ),
        lambda index: _obj("EphemeralRunnerSet", f"s{index}", labels={"ars": "a"}),
        "a",
    )
