"""The removal pool (ADRs 0101, 0108): bounded, one call per runner in flight, each end re-queues
its runner with the outcome kept for its next pass. The registrar here is a stand-in that only
counts: the pool is tested against the real registrar and simulator in
``reconciler_integration/test_end_to_end.py`` and ``test_slots.py``."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from arcflow.common.rpc.registrar import RegistrarRpcClient, RegistrarUnavailableError
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.runner_removals import FAILED, RunnerRemovals
from arcflow.reconciler.keys import Key
from tests.polling import eventually


class CountingRegistrar:
    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate
        self.calls: list[int] = []
        self.at_once = 0
        self.most_at_once = 0

    async def remove_runner(self, namespace: str, ars: str, runner_id: int) -> str:
        self.calls.append(runner_id)
        self.at_once += 1
        self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            await self.gate.wait()
            if runner_id == 13:
                raise RegistrarUnavailableError("no registrar answered (test)")
            return "job_still_running" if runner_id == 7 else "ok"
        finally:
            self.at_once -= 1


async def test_removals_run_bounded_once_per_runner_and_requeue_it() -> None:
    gate = asyncio.Event()
    registrar = CountingRegistrar(gate)
    client = cast(RegistrarRpcClient, registrar)
    queued: list[Key] = []
    removals = RunnerRemovals(concurrency=4, requeue=queued.append)
    scope = Scope("ns", "ars", "")
    for runner_id in range(1, 21):
        for _ in range(2):  # a second pass while the call is in flight starts nothing
            removals.submit(client, scope, "ns", f"r{runner_id}", runner_id)
    await asyncio.sleep(0.05)
    assert registrar.at_once == 4
    gate.set()

    async def all_done() -> bool:
        return not removals.pending

    await eventually(all_done, what="every removal call ended")
    assert sorted(registrar.calls) == list(range(1, 21))
    assert registrar.most_at_once == 4
    assert sorted(queued, key=str) == sorted(
        (Key("er", "ns", f"r{i}") for i in range(1, 21)), key=str
    )
    outcomes: dict[str, Any] = {f"r{i}": removals.take("ns", f"r{i}", i) for i in range(1, 21)}
    assert outcomes["r7"] == "job_still_running"
    assert outcomes["r13"] == FAILED
    assert outcomes["r1"] == "ok"
    assert removals.take("ns", "r1", 1) is None  # taken once
    removals.submit(client, scope, "ns", "r2", 99)  # another registration
    await eventually(all_done, what="the new registration's call ended")
    assert removals.take("ns", "r2", 2) is None
    assert removals.take("ns", "r2", 99) == "ok"


async def test_a_call_with_on_end_hands_its_outcome_over_and_keeps_nothing() -> None:
    """The orphan scan's calls (ADR 0108): no runner to re-queue, no outcome left behind."""
    gate = asyncio.Event()
    gate.set()
    registrar = CountingRegistrar(gate)
    queued: list[Key] = []
    ended: list[str] = []
    removals = RunnerRemovals(concurrency=2, requeue=queued.append)
    client = cast(RegistrarRpcClient, registrar)
    scope = Scope("ns", "ars", "")
    removals.submit(client, scope, "ns", "github-runner/7", 7, on_end=ended.append)
    removals.submit(client, scope, "ns", "github-runner/7", 7, on_end=ended.append)

    async def done() -> list[str]:
        return ended

    assert await eventually(done, what="the orphan's call ended") == ["job_still_running"]
    assert registrar.calls == [7]
    assert queued == []
    assert removals.outcomes == {}
    removals.outcomes[("ns", "r1")] = (1, "ok")
    removals.forget("ns", "r1")  # its runner was released: nothing is kept for it
    assert removals.outcomes == {}
