"""Replica presence for the standby listener (ADR 0025): is the other replica alive?

Each replica renews its key ``replica-<n>`` in the leases bucket every ``renew_every``
seconds and watches the other's; a replica holding a set that a live replica prefers hands it
back (:mod:`arcflow.listener.standby`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import nats.errors

from arcflow.listener.lease import Clock, LeaseStore, LeaseTiming, ReplicaSettings

log = logging.getLogger("arcflow.listener.presence")


class Presence:
    """This replica's presence key, renewed, and whether the other replicas renew theirs.

    A replica counts as alive once its key's revision has moved while we watched and the last
    move was seen recently (a key left by a dead replica never counts).
    """

    def __init__(
        self,
        store: LeaseStore,
        replicas: ReplicaSettings,
        holder: str,
        *,
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.store = store
        self.replicas = replicas
        self.holder = holder
        self.timing = timing or LeaseTiming()
        self._clock = clock
        self._seen: dict[int, tuple[int, float, bool]] = {}  # revision, since, moved

    def alive(self, replica: int) -> bool:
        """Seen moving within ``ttl - renew_every``: shorter than a lease's TTL, so a replica
        that just died is never "alive" when its leases are taken over."""
        revision, since, moved = self._seen.get(replica, (0, 0.0, False))
        return moved and revision > 0 and self._clock() - since < self.timing.give_up_after

    async def run(self, stop: asyncio.Event) -> None:
        announced = -self.timing.renew_every
        while not stop.is_set():
            try:
                if self._clock() - announced >= self.timing.renew_every:
                    await self.store.announce(self.replicas.replica, self.holder)
                    announced = self._clock()
                for other in range(self.replicas.replicas):
                    if other != self.replicas.replica:
                        self._observe(other, await self.store.presence_revision(other))
            except (nats.errors.Error, OSError) as exc:
                log.warning("presence: %s", type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.timing.check_every)

    def _observe(self, replica: int, revision: int) -> None:
        now = self._clock()
        previous = self._seen.get(replica)
        if previous is None:
            self._seen[replica] = (revision, now, False)
        elif revision != previous[0]:
            self._seen[replica] = (revision, now, True)
