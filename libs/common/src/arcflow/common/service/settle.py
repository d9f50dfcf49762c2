"""The workers that settle a subscription's fetched messages (ADR 0035, ADR 0055).

FastStream hands over each fetch (one call, whatever its size) and :meth:`SettlePool.submit`
gives its messages to worker tasks that settle them through ``EventConsumer.process``, outside
FastStream's call, which returns at once. The subscription's fetch loop waits on
:meth:`SettlePool.room` before each fetch:

* ``concurrency`` 1 (stream order): the next fetch waits until the previous one is settled;
* more: the next fetch waits until every message of the previous one has a worker, so at most
  one fetch waits for workers, and the fetch's round trip overlaps the handlers' work. A slow
  message holds one worker, never the next fetch (ADR 0009).

A message that waited for a worker longer than ``progress_after`` seconds (its consumer's ack
wait minus the handler's deadline) has its ack wait restarted (``+WPI``) before its handler
starts, so JetStream never redelivers a message whose handler is still within its deadline.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from arcflow.common.tasks import cancel_and_wait

if TYPE_CHECKING:
    from nats.aio.msg import Msg

    from arcflow.common.nats.consume import EventConsumer

log = logging.getLogger(__name__)


class SettlePool:
    """Up to ``concurrency`` worker tasks that settle messages through ``consumer.process``.

    A worker starts with the message it settles first, then takes waiting ones in fetch order
    and ends when there are none: an idle consumer holds no task.
    """

    def __init__(
        self,
        consumer: EventConsumer,
        concurrency: int = 1,
        *,
        progress_after: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.consumer = consumer
        self.concurrency = concurrency
        self.progress_after = progress_after
        self._waiting: collections.deque[tuple[Msg, float]] = collections.deque()
        self._busy = 0  # workers settling a message now
        # set when the last waiting message is taken, and when the last worker ends
        self._changed = asyncio.Event()
        self._workers: set[asyncio.Task[None]] = set()
        self._worker_name = f"settle {consumer.spec.durable}"

    @property
    def waiting(self) -> int:
        """Fetched messages that no worker has taken yet."""
        return len(self._waiting)

    def _full(self) -> bool:
        return bool(self._waiting) or (self.concurrency == 1 and self._busy > 0)

    async def room(self, batch: int) -> int:
        """Wait until the next fetch may come (see the module docstring); returns its size."""
        while self._full():
            self._changed.clear()
            await self._changed.wait()
        return batch

    async def submit(self, messages: Sequence[Msg]) -> None:
        """Hand over one fetch. With ``concurrency`` 1 (stream order) this returns once the
        fetch is settled; with more, at once (messages beyond the free workers wait)."""
        now = asyncio.get_running_loop().time()
        for msg in messages:
            if self._busy < self.concurrency:
                self._start(msg)
            else:
                self._waiting.append((msg, now))
        if self.concurrency > 1:
            return
        try:
            while self._full():
                self._changed.clear()
                await self._changed.wait()
        except asyncio.CancelledError:  # in order: the fetch is abandoned as a whole
            await self.stop()
            raise

    def _start(self, msg: Msg) -> None:
        self._busy += 1
        worker = asyncio.create_task(self._work(msg), name=self._worker_name)
        self._workers.add(worker)
        worker.add_done_callback(self._workers.discard)

    async def _work(self, msg: Msg) -> None:
        try:
            while True:
                await self.consumer.process(msg)  # never raises but CancelledError
                if not self._waiting:
                    return
                msg, since = self._waiting.popleft()
                if not self._waiting:
                    self._changed.set()  # every fetched message has a worker
                waited = asyncio.get_running_loop().time() - since
                if self.progress_after is not None and waited > self.progress_after:
                    await self._restart_ack_wait(msg, waited)
        finally:
            self._busy -= 1
            if not self._busy:
                self._changed.set()  # idle: what was fetched is settled

    async def _restart_ack_wait(self, msg: Msg, waited: float) -> None:
        log.debug(
            "message waited %.1f s for a worker; restarting its ack wait",
            waited,
            extra={"consumer": self.consumer.spec.durable, "subject": msg.subject},
        )
        with contextlib.suppress(Exception):  # lost connection: redelivered, as any unacked
            await msg.in_progress()

    async def stop(self) -> None:
        """Cancel the workers and drop what waits: never acked, so JetStream redelivers."""
        self._waiting.clear()
        await cancel_and_wait(list(self._workers))
        self._workers.clear()
        self._busy = 0  # a worker cancelled before its first step never ran its ``finally``
        self._changed.set()
