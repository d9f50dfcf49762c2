"""Scale set leases for a standby listener (ADR 0025): who serves a scale set, in a NATS KV bucket.

With ``ARCFLOW_LISTENER_REPLICAS=2`` two listener processes (two pods) serve the same scale
sets, and each scale set is served by exactly one of them: the holder of its lease, the key
``<scale set id>`` of the listener-owned bucket ``arcflow_listener_leases``. The value names the
holder (``<host>/<replica>``) and the lease's time to live; the holder renews it (a
compare-and-set on the revision) every ``renew_every`` seconds.

A contender never compares clocks: it watches the revision. A lease whose revision has not moved
for ``ttl`` seconds *of the contender's own monotonic clock* has lapsed; the contender then takes
it with a compare-and-set on the revision it saw, so of two contenders at most one wins. The
holder stops serving when a renewal fails because somebody else wrote the key, or when it could
not renew for ``ttl - renew_every`` seconds (NATS unreachable): by the time a contender may
take the lease, the old holder has given it up.

Preference: every replica knows every scale set (same ``config.json``). Sorted by id, set ``i``
prefers replica ``i mod replicas``, so each replica owns a share. An absent key is claimed at
once by its preferred replica and after ``defer`` seconds by another one (so a fresh start
spreads the sets); a lapsed lease is claimed at once by whoever sees it lapse (takeover).
Each replica also renews a presence key ``replica-<n>``; a replica holding a set that another,
live replica prefers hands it back (stops its pump, deleting the session, then deletes the
lease), so a replica that restarts gets its share back and the sets stay spread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from arcflow.common.nats.jetstream import KV_LISTENER_LEASES, ensure_bucket

log = logging.getLogger("arcflow.listener.lease")

LEASES_BUCKET = KV_LISTENER_LEASES
REPLICAS_ENV = "ARCFLOW_LISTENER_REPLICAS"
REPLICA_ENV = "ARCFLOW_LISTENER_REPLICA"
MAX_REPLICAS = 2

Clock = Callable[[], float]


class LeaseConfigError(ValueError):
    """The replica settings in the environment cannot work."""


@dataclass(frozen=True)
class LeaseTiming:
    ttl: float = 3.0
    renew_every: float = 1.0
    check_every: float = 0.25
    defer: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_every < self.ttl:
            raise ValueError("a lease needs 0 < renew_every < ttl")
        if self.check_every <= 0 or self.defer < 0:
            raise ValueError("a lease needs check_every > 0 and defer >= 0")

    @property
    def give_up_after(self) -> float:
        """How long a holder serves without a successful renewal."""
        return self.ttl - self.renew_every


@dataclass(frozen=True)
class ReplicaSettings:
    replicas: int = 1
    replica: int = 0

    @property
    def standby(self) -> bool:
        return self.replicas > 1

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None) -> ReplicaSettings:
        env = environ or {}
        raw_count = env.get(REPLICAS_ENV, "").strip() or "1"
        raw_index = env.get(REPLICA_ENV, "").strip() or "0"
        try:
            replicas, replica = int(raw_count), int(raw_index)
        except ValueError:
            raise LeaseConfigError(
                f"{REPLICAS_ENV} and {REPLICA_ENV} must be integers, got "
                f"{raw_count!r} and {raw_index!r}"
            ) from None
        if not 1 <= replicas <= MAX_REPLICAS:
            raise LeaseConfigError(f"{REPLICAS_ENV} must be 1 or {MAX_REPLICAS}, got {replicas}")
        if not 0 <= replica < replicas:
            raise LeaseConfigError(f"{REPLICA_ENV} must be in [0, {replicas}), got {replica}")
        return cls(replicas, replica)


def preferred_replicas(scale_set_ids: Sequence[int], replicas: int) -> dict[int, int]:
    """Scale set id -> the replica that claims it first: by rank of id, round robin."""
    return {sid: rank % replicas for rank, sid in enumerate(sorted(set(scale_set_ids)))}


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    ttl: float

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> LeaseRecord | None:
        try:
            raw = json.loads(data or b"")
            return cls(str(raw["holder"]), float(raw["ttl"]))
        except (ValueError, TypeError, KeyError):
            return None


class LeaseStore:
    """Compare-and-set reads and writes of the leases bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> LeaseStore:
        await ensure_bucket(js, LEASES_BUCKET)
        return cls(await js.key_value(LEASES_BUCKET.bucket))

    async def read(self, scale_set_id: int) -> tuple[LeaseRecord | None, int]:
        """The record and its revision; ``(None, 0)`` when absent or deleted."""
        try:
            entry = await self._kv.get(str(scale_set_id))
        except nats.js.errors.KeyNotFoundError:
            return None, 0
        record = LeaseRecord.decode(entry.value)
        return record, int(entry.revision or 0) if record is not None else 0

    async def claim(self, scale_set_id: int, record: LeaseRecord, revision: int) -> int | None:
        """Write ``record`` if the key is still at ``revision`` (0: absent); the new revision,
        or None when somebody else wrote first."""
        try:
            if revision == 0:
                return int(await self._kv.create(str(scale_set_id), record.encode()))
            return int(await self._kv.update(str(scale_set_id), record.encode(), last=revision))
        except nats.js.errors.KeyWrongLastSequenceError:
            return None
        except nats.js.errors.APIError as exc:  # create on a live key: "wrong last sequence"
            if exc.err_code == 10071:
                return None
            raise

    async def release(self, scale_set_id: int, revision: int) -> None:
        with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):
            await self._kv.delete(str(scale_set_id), last=revision)

    async def announce(self, replica: int, holder: str) -> None:
        await self._kv.put(presence_key(replica), holder.encode())

    async def presence_revision(self, replica: int) -> int:
        try:
            entry = await self._kv.get(presence_key(replica))
        except nats.js.errors.KeyNotFoundError:
            return 0
        return int(entry.revision or 0)


def presence_key(replica: int) -> str:
    return f"replica-{replica}"


class ScaleSetLease:
    """The lease of one scale set as one replica sees it: :meth:`acquire`, :meth:`hold`,
    :meth:`release`."""

    def __init__(
        self,
        store: LeaseStore,
        scale_set_id: int,
        holder: str,
        *,
        preferred: bool,
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.store = store
        self.scale_set_id = scale_set_id
        self.holder = holder
        self.preferred = preferred
        self.timing = timing or LeaseTiming()
        self._clock = clock
        self.revision = 0
        self.held = False
        self.takeovers = 0
        #: The holder this replica took the lease from at its last acquisition ("" if none).
        self.taken_from = ""

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this replica holds the lease (True) or ``stop`` is set (False)."""
        timing = self.timing
        seen_revision = -1
        seen_since = self._clock()
        while not stop.is_set():
            try:
                record, revision = await self.store.read(self.scale_set_id)
            except (nats.errors.Error, OSError) as exc:
                log.warning("lease %d: read failed: %s", self.scale_set_id, type(exc).__name__)
                record, revision = None, -1
            now = self._clock()
            if revision != seen_revision:
                seen_revision, seen_since = revision, now
            if revision >= 0 and self._may_claim(record, now - seen_since):
                if await self._claim(record, revision):
                    return True
                seen_revision = -1  # somebody else moved it: observe afresh
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=timing.check_every)
        return False

    def _may_claim(self, record: LeaseRecord | None, unchanged_for: float) -> bool:
        if record is None:
            return self.preferred or unchanged_for >= self.timing.defer
        if record.holder == self.holder:
            return True  # written by a previous process of this replica: it is dead
        return unchanged_for >= max(record.ttl, self.timing.check_every)

    async def _claim(self, record: LeaseRecord | None, revision: int) -> bool:
        mine = LeaseRecord(self.holder, self.timing.ttl)
        try:
            new_revision = await self.store.claim(self.scale_set_id, mine, revision)
        except (nats.errors.Error, OSError) as exc:
            log.warning("lease %d: claim failed: %s", self.scale_set_id, type(exc).__name__)
            return False
        if new_revision is None:
            return False
        self.revision, self.held = new_revision, True
        self.taken_from = ""
        if record is not None and record.holder != self.holder:
            self.taken_from = record.holder
            self.takeovers += 1
        log.info(
            "lease of scale set %d held by %s%s",
            self.scale_set_id,
            self.holder,
            f" (taken over from {self.taken_from})" if self.taken_from else "",
        )
        return True

    async def hold(self, stop: asyncio.Event, hand_back: Callable[[], bool] | None = None) -> None:
        """Renew until ``stop`` is set or ``hand_back()`` says so (returns, still held: the
        caller stops serving, then :meth:`release`) or the lease is lost (``held`` False)."""
        timing = self.timing
        renewed_at = self._clock()
        mine = LeaseRecord(self.holder, timing.ttl)
        while self.held and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=timing.renew_every)
            if stop.is_set():
                return
            if hand_back is not None and hand_back():
                log.info("lease %d: handing it back to its preferred replica", self.scale_set_id)
                return
            try:
                revision = await self.store.claim(self.scale_set_id, mine, self.revision)
            except (nats.errors.Error, OSError) as exc:
                if self._clock() - renewed_at >= timing.give_up_after:
                    log.warning(
                        "lease %d: not renewed for %.1fs (%s): giving it up",
                        self.scale_set_id,
                        self._clock() - renewed_at,
                        type(exc).__name__,
                    )
                    self.held = False
                continue
            if revision is None:
                log.warning("lease %d: taken by another replica", self.scale_set_id)
                self.held = False
                return
            self.revision, renewed_at = revision, self._clock()

    async def release(self) -> None:
        """Give the lease up now (clean shutdown), so the other replica need not wait a TTL."""
        if not self.held:
            return
        self.held = False
        try:
            await self.store.release(self.scale_set_id, self.revision)
        except (nats.errors.Error, OSError) as exc:
            log.warning("lease %d: release failed: %s", self.scale_set_id, type(exc).__name__)
