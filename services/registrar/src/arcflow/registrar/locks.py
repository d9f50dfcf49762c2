"""A per-ARS lease lock in a JetStream KV bucket, so two registrar replicas never converge the
same ARS at once.

Why a lock at all: get-or-create by name is two calls (GET, then POST). Two replicas handling
two copies of the same change event could both see "absent" and both create, leaving two
scale sets with one name. The durable consumer hands each *message* to one replica, but a
storm of messages about one ARS is spread over both; so convergence of one ARS is serialised.

How: ``kv.create`` succeeds for exactly one contender (an expected-last-sequence CAS on the
key). The value holds the owner and an expiry; a holder that died is taken over after its
lease expires with ``kv.update(last=revision)``, again a CAS. A holder renews its lease while
it works. Inside one process an ``asyncio.Lock`` per key avoids pointless CAS round trips.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Final

from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from arcflow.common.nats import KvBucketSpec

LOCKS_BUCKET: Final = KvBucketSpec(
    "arcflow_registrar_locks", "Per-ARS leases of registrar replicas (registrar-owned)"
)
_POLL_SECONDS: Final = 0.05


class LockBusyError(Exception):
    """Another replica holds the ARS; the event is retried later (nak with delay)."""


class LeaseLocks:
    def __init__(
        self, kv: KeyValue, owner: str, *, ttl_seconds: float = 30.0, wait_seconds: float = 2.0
    ) -> None:
        self._kv = kv
        self.owner = owner
        self.ttl = ttl_seconds
        self.wait = wait_seconds
        self._local: dict[str, asyncio.Lock] = {}

    def _value(self) -> bytes:
        return json.dumps({"owner": self.owner, "expires": time.time() + self.ttl}).encode()

    async def _try_acquire(self, key: str) -> int | None:
        try:
            return await self._kv.create(key, self._value())
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await self._kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):
            return None  # released in between: the next attempt creates it
        try:
            held = json.loads(entry.value or b"{}")
            expires = float(held.get("expires", 0))
        except (ValueError, TypeError, AttributeError):
            expires = 0.0
        if expires > time.time():
            return None
        try:
            return await self._kv.update(key, self._value(), last=entry.revision)
        except KeyWrongLastSequenceError:
            return None

    async def _acquire(self, key: str) -> int:
        deadline = time.monotonic() + self.wait
        while True:
            revision = await self._try_acquire(key)
            if revision is not None:
                return revision
            if time.monotonic() >= deadline:
                raise LockBusyError(f"{key} is being converged by another registrar")
            await asyncio.sleep(_POLL_SECONDS)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lease on ``key`` for the body; renewed every third of the TTL."""
        local = self._local.setdefault(key, asyncio.Lock())
        async with local:
            revision = await self._acquire(key)
            state = {"revision": revision}

            async def renew() -> None:
                while True:
                    await asyncio.sleep(self.ttl / 3)
                    with contextlib.suppress(KeyWrongLastSequenceError):
                        state["revision"] = await self._kv.update(
                            key, self._value(), last=state["revision"]
                        )

            renewer = asyncio.create_task(renew())
            try:
                yield
            finally:
                renewer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewer
                with contextlib.suppress(Exception):
                    await self._kv.delete(key, last=state["revision"])
