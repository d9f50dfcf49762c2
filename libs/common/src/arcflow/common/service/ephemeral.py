"""Reading a stream without disturbing it: an ephemeral push consumer (ADR 0024, ADR 0034).

The services consume through durable pull subscribers that settle every message
(:mod:`arcflow.common.service.subscribers`). A reader that only looks (``arcflow audit``) must
never touch those durables, and its NATS user may send nothing but an ephemeral consumer
create: so it gets a server-side consumer with no name, no acks (``AckPolicy.NONE``), flow
control and heartbeats, kept in memory and removed by the server once idle, delivering to the
reader's own inbox. The create reply says how many messages were pending, so the reader knows
where the stream ended when it started without a consumer-info grant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

#: How many queued messages one :meth:`EphemeralReader.take` returns at most.
TAKE_BATCH: Final = 256
#: The server removes the consumer after this long without the reader.
IDLE_SECONDS: Final = 30.0
HEARTBEAT_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where the consumer starts: the whole stream, a time, a sequence, or new messages."""

    policy: DeliverPolicy = DeliverPolicy.ALL
    time: datetime | None = None
    sequence: int | None = None


class EphemeralReader:
    """One ephemeral push consumer; :attr:`backlog` is what was pending when it was created."""

    def __init__(self, sub: JetStreamContext.PushSubscription, backlog: int) -> None:
        self._sub = sub
        self.backlog = backlog

    async def take(self, timeout: float) -> list[Msg]:  # noqa: ASYNC109 - first-message wait
        """Up to :data:`TAKE_BATCH` messages: waits ``timeout`` for the first, then takes what
        is already queued (an empty list when nothing came)."""
        try:
            batch = [await self._sub.next_msg(timeout=timeout)]
        except NatsTimeoutError:
            return []
        while len(batch) < TAKE_BATCH and self._sub.pending_msgs > 0:
            batch.append(await self._sub.next_msg(timeout=timeout))
        return batch


async def open_ephemeral(
    nc: NatsClient, stream: str, filter_subject: str, start: StartAt | None = None
) -> EphemeralReader:
    """Create the consumer on ``stream`` (an ephemeral create: no name in the API subject, all
    a read-only user may send) and subscribe to it on the connection's own inbox."""
    start = start or StartAt()
    config = ConsumerConfig(
        deliver_subject=nc.new_inbox(),
        deliver_policy=start.policy,
        opt_start_time=start.time,
        opt_start_seq=start.sequence,
        filter_subject=filter_subject,
        ack_policy=AckPolicy.NONE,
        flow_control=True,
        idle_heartbeat=HEARTBEAT_SECONDS,
        inactive_threshold=IDLE_SECONDS,
        mem_storage=True,
        num_replicas=1,
    )
    info = await nc.jsm().add_consumer(stream, config=config)
    sub = await nc.jetstream().subscribe_bind(stream, config=info.config, consumer=info.name)
    return EphemeralReader(sub, info.num_pending or 0)
