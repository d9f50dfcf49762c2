"""JetStream declared as code: streams, durable consumers and KV buckets, created idempotently.

Every service calls :func:`ensure_jetstream` at start-up, so the layout converges to this
file whatever starts first; two services doing it at once both succeed (identical creates are
no-ops on the server, a changed stream is updated in place).

Redelivery bound: a :class:`ConsumerSpec` with ``max_deliver=N`` lets our consumer helper call
the handler at most N times and then dead-letter the message. The server-side consumer gets
``max_deliver=N+1`` so that a process dying during the N-th attempt still gets the message
back once more, sees it is over the limit and dead-letters it instead of losing it silently.

Replicas (a NATS cluster): streams and KV buckets get ``replicas`` copies, from the caller or
``ARCFLOW_NATS_REPLICAS`` (:func:`configured_replicas`).
Consumers leave their replica count unset, so the server gives each the replica count of
its stream. A caller that was told no count at all creates missing streams with one replica
and never changes the count of an existing stream, so a process started without the setting
(say a listener pod) cannot shrink a replicated stream (ADR 0022).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError

from arcflow.common import subjects

log = logging.getLogger(__name__)

#: Publishes with the same ``Nats-Msg-Id`` inside this window are stored once.
DUPLICATE_WINDOW_SECONDS: Final = 120.0
_DAY: Final = 86_400.0
_STREAM_IN_USE: Final = 10058  # "stream name already in use with a different configuration"
#: JetStream keeps at most five copies of a stream.
MAX_REPLICAS: Final = 5
REPLICAS_ENV: Final = "ARCFLOW_NATS_REPLICAS"


def configured_replicas(environ: Mapping[str, str] | None = None) -> int | None:
    """The stream/KV replica count from ``ARCFLOW_NATS_REPLICAS``, or ``None`` when unset.

    ``None`` means "not told": missing streams are then created with one replica and the
    replica count of an existing one is never changed. Read from the environment directly
    (no pydantic-settings: the listener process imports this module). Raises ``ValueError``
    for anything but a whole number from 1 to 5.
    """
    raw = (os.environ if environ is None else environ).get(REPLICAS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_REPLICAS:
        raise ValueError(f"{REPLICAS_ENV} must be a whole number from 1 to {MAX_REPLICAS}")
    return int(raw)


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """One JetStream stream on file storage with a de-duplication window."""

    name: str
    subjects: tuple[str, ...]
    description: str
    max_age_seconds: float
    duplicate_window_seconds: float = DUPLICATE_WINDOW_SECONDS
    max_bytes: int = -1

    def to_config(self, replicas: int = 1) -> api.StreamConfig:
        """The nats-py stream configuration."""
        return api.StreamConfig(
            name=self.name,
            description=self.description,
            subjects=list(self.subjects),
            retention=api.RetentionPolicy.LIMITS,
            storage=api.StorageType.FILE,
            max_age=self.max_age_seconds,
            max_bytes=self.max_bytes,
            duplicate_window=self.duplicate_window_seconds,
            num_replicas=replicas,
            discard=api.DiscardPolicy.OLD,
        )


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """A durable pull consumer with explicit acks and a bounded number of handler attempts."""

    durable: str
    stream: str
    filter_subject: str
    description: str = ""
    ack_wait_seconds: float = 30.0
    max_deliver: int = 5
    max_ack_pending: int = 1000
    #: First retry delay after a failed attempt; doubles per attempt up to the cap.
    retry_delay_seconds: float = 1.0
    retry_delay_cap_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.max_deliver < 1:
            raise ValueError("max_deliver must be at least 1")
        if any(ch in self.durable for ch in ". *>/\\\t\n") or not self.durable:
            raise ValueError(f"invalid durable consumer name {self.durable!r}")

    def to_config(self) -> api.ConsumerConfig:
        """The nats-py consumer configuration (server ``max_deliver`` is one above ours)."""
        return api.ConsumerConfig(
            name=self.durable,
            durable_name=self.durable,
            description=self.description or None,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_seconds,
            max_deliver=self.max_deliver + 1,
            max_ack_pending=self.max_ack_pending,
            filter_subject=self.filter_subject,
        )

    def retry_delay(self, delivery_count: int) -> float:
        """Delay before the next attempt after attempt number ``delivery_count`` failed."""
        exponent = max(0, delivery_count - 1)
        return float(min(self.retry_delay_seconds * (2**exponent), self.retry_delay_cap_seconds))


@dataclass(frozen=True, slots=True)
class KvBucketSpec:
    """A JetStream key-value bucket on file storage."""

    bucket: str
    description: str
    history: int = 1

    def to_config(self, replicas: int = 1) -> api.KeyValueConfig:
        """The nats-py KV configuration."""
        return api.KeyValueConfig(
            bucket=self.bucket,
            description=self.description,
            history=self.history,
            storage=api.StorageType.FILE,
            replicas=replicas,
        )


# --- streams ------------------------------------------------------------------------------

STREAM_K8S: Final = StreamSpec(
    "ARC_K8S", ("arc.k8s.>",), "Kubernetes object changes from the watcher", max_age_seconds=_DAY
)
STREAM_SCALESETS: Final = StreamSpec(
    "ARC_SCALESETS",
    ("arc.scalesets.>",),
    "Scale set assignments and deletions from the registrar",
    max_age_seconds=30 * _DAY,
)
STREAM_JOBS: Final = StreamSpec(
    "ARC_JOBS", ("arc.jobs.>",), "GitHub job message batches per scale set", 7 * _DAY
)
STREAM_SCALE: Final = StreamSpec(
    "ARC_SCALE", ("arc.scale.>",), "Scaling decisions of the listener workers", 7 * _DAY
)
STREAM_AUDIT: Final = StreamSpec(
    "ARC_AUDIT", ("arc.audit.>",), "Every object the reconciler wrote, and why", 30 * _DAY
)
STREAM_ERRORS: Final = StreamSpec(
    "ARC_ERRORS", ("arc.errors.>",), "Invalid specs and registration failures", 30 * _DAY
)
STREAM_DLQ: Final = StreamSpec(
    "ARC_DLQ", ("arc.dlq.>",), "Dead letters: messages no handler could process", 30 * _DAY
)

STREAMS: Final[tuple[StreamSpec, ...]] = (
    STREAM_K8S,
    STREAM_SCALESETS,
    STREAM_JOBS,
    STREAM_SCALE,
    STREAM_AUDIT,
    STREAM_ERRORS,
    STREAM_DLQ,
)

# --- consumers ----------------------------------------------------------------------------

#: Ack wait of a consumer whose handler only enqueues a key (microseconds; ADRs 0069, 0072).
#: Short on purpose: FastStream's batch pull loop can drop the messages it fetched in one
#: batch window (a fetch that raises a plain ``TimeoutError`` ends the loop, which FastStream's
#: supervisor restarts without them; docs/service-skeleton.md), and JetStream delivers a message
#: that was never settled again only after the ack wait.
ENQUEUE_ACK_WAIT_SECONDS: Final = 5.0
# ARC_K8S has the registrar's consumers only: the reconciler's Kubernetes trigger is its own
# watch-fed cache (ADR 0069); auditors read the stream through ephemeral consumers.

CONSUMER_REGISTRAR_ARS: Final = ConsumerSpec(
    durable="registrar-ars",
    stream=STREAM_K8S.name,
    filter_subject=subjects.k8s_filter("autoscalingrunnersets"),
    description="registrar: ARS changes -> get-or-create/delete scale sets per variant",
    ack_wait_seconds=ENQUEUE_ACK_WAIT_SECONDS,
)
CONSUMER_RECONCILER_SCALESETS: Final = ConsumerSpec(
    durable="reconciler-scalesets",
    stream=STREAM_SCALESETS.name,
    filter_subject="arc.scalesets.>",
    description="reconciler: scale set assigned/deleted -> converge ERS and listener",
    ack_wait_seconds=ENQUEUE_ACK_WAIT_SECONDS,
)

#: Registration failures (and invalid specs) on the ARS they are about: the reconciler, the
#: writer of ARS status, turns them into a condition and a Warning Event (ADR 0064).
CONSUMER_RECONCILER_ERRORS: Final = ConsumerSpec(
    durable="reconciler-errors",
    stream=STREAM_ERRORS.name,
    filter_subject="arc.errors.>",
    description="reconciler: registration or listener session failed -> ARS condition and Event",
    ack_wait_seconds=ENQUEUE_ACK_WAIT_SECONDS,
)

CONSUMERS: Final[tuple[ConsumerSpec, ...]] = (
    CONSUMER_REGISTRAR_ARS,
    CONSUMER_RECONCILER_SCALESETS,
    CONSUMER_RECONCILER_ERRORS,
)

# --- KV buckets ---------------------------------------------------------------------------

KV_SCALESETS: Final = KvBucketSpec(
    "arcflow_scalesets", "Scale set id per <ns>.<ars>.<variant> (registrar-owned)", history=5
)
KV_WATCH: Final = KvBucketSpec(
    "arcflow_watch", "Watcher resume points: last resourceVersion per watched resource"
)
#: Written by listener pods only, but declared with the layout so that on a NATS cluster it
#: gets the configured replicas (listener pods are not told the count; ADR 0022).
KV_LISTENER_SESSIONS: Final = KvBucketSpec(
    "arcflow_listener_sessions",
    "GitHub message session per scale set id, for a restarted listener to delete (listener-owned)",
)
#: Standby-mode listeners (ADR 0025): which replica serves each scale set id, and presence.
KV_LISTENER_LEASES: Final = KvBucketSpec(
    "arcflow_listener_leases",
    "Which standby-mode listener replica serves each scale set id (listener-owned)",
)
KV_BUCKETS: Final[tuple[KvBucketSpec, ...]] = (
    KV_SCALESETS,
    KV_WATCH,
    KV_LISTENER_SESSIONS,
    KV_LISTENER_LEASES,
)


def auditor_consumer(name: str, filter_subject: str, *, max_deliver: int = 3) -> ConsumerSpec:
    """A durable consumer for an auditor (CLI or third party) on any arcflow filter subject."""
    return ConsumerSpec(
        durable=f"auditor-{name}",
        stream=stream_for_subject(filter_subject).name,
        filter_subject=filter_subject,
        description=f"auditor {name}",
        max_deliver=max_deliver,
    )


def stream_for_subject(subject: str, streams: Sequence[StreamSpec] = STREAMS) -> StreamSpec:
    """The stream that stores ``subject`` (or a filter inside one stream's subjects)."""
    for spec in streams:
        for pattern in spec.subjects:
            prefix = pattern.removesuffix(">")
            if subject.startswith(prefix) and len(subject) > len(prefix):
                return spec
    raise ValueError(f"no arcflow stream stores subject {subject!r}")


@dataclass
class JetStreamLayout:
    """What :func:`ensure_jetstream` declares (override in tests to add or narrow)."""

    streams: Sequence[StreamSpec] = STREAMS
    consumers: Sequence[ConsumerSpec] = CONSUMERS
    buckets: Sequence[KvBucketSpec] = KV_BUCKETS
    #: Stream and KV copies: ``ARCFLOW_NATS_REPLICAS`` when set, else 1.
    replicas: int = field(default_factory=lambda: configured_replicas() or 1)
    extra_consumers: list[ConsumerSpec] = field(default_factory=list)


def _replicas(replicas: int | None) -> int | None:
    return configured_replicas() if replicas is None else replicas


async def ensure_stream(
    js: JetStreamContext, spec: StreamSpec, replicas: int | None = None
) -> None:
    """Create the stream, or update it in place when its configuration changed.

    ``replicas`` ``None`` means ``ARCFLOW_NATS_REPLICAS``; when that is unset too, a missing
    stream is created with one replica and an existing one is left as it is.
    """
    wanted = _replicas(replicas)
    config = spec.to_config(wanted or 1)
    try:
        await js.add_stream(config)
    except BadRequestError as exc:
        if exc.err_code != _STREAM_IN_USE:
            raise
        if wanted is None:
            log.info(
                "stream kept: its configuration differs, replicas not configured",
                extra={"stream": spec.name},
            )
            return
        await js.update_stream(config)
        log.info("stream updated", extra={"stream": spec.name, "replicas": wanted})


async def ensure_consumer(js: JetStreamContext, spec: ConsumerSpec) -> None:
    """Create or update a durable consumer (server >= 2.10 create-or-update semantics)."""
    await js.add_consumer(spec.stream, config=spec.to_config())


async def ensure_bucket(
    js: JetStreamContext, spec: KvBucketSpec, replicas: int | None = None
) -> None:
    """Create the KV bucket if missing; an existing one keeps its configuration, except its
    replica count when one is configured (``replicas`` or ``ARCFLOW_NATS_REPLICAS``)."""
    wanted = _replicas(replicas)
    try:
        await js.create_key_value(spec.to_config(wanted or 1))
    except BadRequestError as exc:
        if exc.err_code != _STREAM_IN_USE:
            raise
        info = await js.stream_info(f"KV_{spec.bucket}")
        if wanted is not None and info.config.num_replicas != wanted:
            info.config.num_replicas = wanted
            await js.update_stream(info.config)
            log.info("bucket replicas updated", extra={"bucket": spec.bucket, "replicas": wanted})


async def ensure_jetstream(
    js: JetStreamContext,
    layout: JetStreamLayout | None = None,
    *,
    consumers: Iterable[ConsumerSpec] | None = None,
) -> None:
    """Declare every stream, consumer and KV bucket; idempotent and safe to run concurrently.

    ``consumers`` replaces the layout's consumer list (a service may declare only its own).
    """
    layout = layout or JetStreamLayout()
    await asyncio.gather(*(ensure_stream(js, s, layout.replicas) for s in layout.streams))
    await asyncio.gather(*(ensure_bucket(js, b, layout.replicas) for b in layout.buckets))
    wanted = list(layout.consumers if consumers is None else consumers)
    wanted += layout.extra_consumers
    await asyncio.gather(*(ensure_consumer(js, c) for c in wanted))
