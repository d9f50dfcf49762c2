"""Standby mode (ADR 0025): serve a scale set only while holding its lease.

Per scale set, forever until shutdown: wait for the lease (:class:`ScaleSetLease`), build a
fresh pump and decision (the decision resumes from the last ``scale.decision`` as after a
restart), run the pump under the per-set supervisor while a renewal task keeps the lease, and
stop it as soon as the lease is lost. The pump deletes the session recorded for the set before
it creates its own (whoever recorded it no longer holds the lease), so a takeover meets no
409. On shutdown the pump deletes its session first and the lease is released after, so the
other replica takes the set at once instead of after a TTL.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.lease import (
    LeaseStore,
    LeaseTiming,
    ReplicaSettings,
    ScaleSetLease,
    preferred_replicas,
)
from arcflow.listener.metrics import ScaleSetRecorder
from arcflow.listener.presence import Presence
from arcflow.listener.supervisor import Backoff
from arcflow.listener.unit import ScaleSetUnit

log = logging.getLogger("arcflow.listener.standby")

#: A fresh unit for a scale set and the event that ends its run (the lease held).
UnitFactory = Callable[[ScaleSetTarget, asyncio.Event], ScaleSetUnit]


class StandbyOptions(Protocol):
    @property
    def backoff(self) -> Backoff: ...

    @property
    def lease_timing(self) -> LeaseTiming: ...


class Listener(Protocol):
    """What standby mode needs of ``arcflow.listener.app.Listener`` (no import of it: no cycle)."""

    units: list[ScaleSetUnit]
    leases: dict[int, ScaleSetLease]

    @property
    def targets(self) -> Sequence[ScaleSetTarget]: ...

    @property
    def replicas(self) -> ReplicaSettings: ...

    @property
    def holder(self) -> str: ...

    @property
    def options(self) -> StandbyOptions: ...

    def recorder(self, target: ScaleSetTarget) -> ScaleSetRecorder: ...


async def run_standby(
    listener: Listener, stop: asyncio.Event, store: LeaseStore, make_unit: UnitFactory
) -> None:
    preferred = preferred_replicas(
        [t.scale_set_id for t in listener.targets], listener.replicas.replicas
    )
    listener.leases = {
        t.scale_set_id: ScaleSetLease(
            store,
            t.scale_set_id,
            listener.holder,
            preferred=preferred[t.scale_set_id] == listener.replicas.replica,
            timing=listener.options.lease_timing,
        )
        for t in listener.targets
    }
    listener.units = []
    presence = Presence(
        store, listener.replicas, listener.holder, timing=listener.options.lease_timing
    )
    announcer = asyncio.ensure_future(presence.run(stop))
    try:
        await asyncio.gather(
            *(
                _serve(
                    listener,
                    target,
                    listener.leases[target.scale_set_id],
                    stop,
                    make_unit,
                    functools.partial(presence.alive, preferred[target.scale_set_id]),
                )
                for target in listener.targets
            )
        )
    finally:
        announcer.cancel()


async def _serve(
    listener: Listener,
    target: ScaleSetTarget,
    lease: ScaleSetLease,
    stop: asyncio.Event,
    make_unit: UnitFactory,
    preferred_alive: Callable[[], bool],
) -> None:
    recorder = listener.recorder(target)
    recorder.record_lease(False)
    while not stop.is_set():
        if not await lease.acquire(stop):
            return
        recorder.record_lease(True, taken_over=bool(lease.taken_from))
        inner = asyncio.Event()
        unit = make_unit(target, inner)
        listener.units = [u for u in listener.units if u.target is not target] + [unit]

        async def keep(lease: ScaleSetLease = lease, inner: asyncio.Event = inner) -> None:
            await lease.hold(stop, None if lease.preferred else preferred_alive)
            inner.set()

        keeper = asyncio.ensure_future(keep())
        try:
            await unit.run_supervised(inner, listener.options.backoff)
        finally:
            keeper.cancel()
            recorder.record_lease(False)
            await lease.release()
        if not stop.is_set():
            log.warning("%s: lease lost or handed back; standing by", target.label)
