"""What a service declares: its name, settings, subscriptions, periodic tasks, RPC endpoints,
components and the event types it publishes (pure data, no I/O, nothing imported eagerly that
a light process such as the listener would not want).

A service is a :class:`ServiceSpec`; :func:`arcflow.common.service.main` runs any spec. The
spec is also what the flow table (``docs/events.md``) and the AsyncAPI document are built from,
so what a service consumes and produces is written down once, next to its code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from arcflow.common.service.endpoints import RpcEndpoint

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

    from arcflow.common.events import EventBase
    from arcflow.common.kube.settings import KubeSettings
    from arcflow.common.nats.consume import Delivery
    from arcflow.common.nats.jetstream import ConsumerSpec, KvBucketSpec, StreamSpec
    from arcflow.common.reconcile.declare import Controllers
    from arcflow.common.service.context import ServiceContext

#: The object a service builds at start (its domain objects); handlers receive it first.
StateT = TypeVar("StateT")


class Component(Protocol):
    """Something with a life cycle the runtime starts (in declared order) and stops (reverse).

    ``healthy``/``ready`` feed ``/healthz``/``/readyz``; a component that has no opinion
    returns ``True``.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def healthy(self) -> bool: ...

    @property
    def ready(self) -> bool: ...


#: ``handler(state, event, delivery)``; ``event`` is typed by the handler as the union of its
#: subscription's ``event_types`` (``event: ScaleSetAssigned | ScaleSetDeleted``).
Handler = Callable[[Any, Any, "Delivery"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Subscription:
    """Events of ``event_types`` from one durable consumer, handed to ``handler``.

    ``handler(state, event, delivery)`` receives one parsed event of ``event_types``
    (anything else on the subject is acked and skipped; a malformed message is dead-lettered).
    ``batch`` is how many messages one fetch asks for (one FastStream call per fetch);
    ``concurrency`` how many of a fetch's events are handled at once (1: one at a time in
    stream order); the next fetch starts when the batch is settled. ``tune`` adapts the
    consumer spec to the settings (retry delays).
    """

    consumer: ConsumerSpec
    event_types: tuple[type[EventBase], ...]
    handler: Handler
    concurrency: int = 1
    batch: int = 16
    #: How long one handler call may take before it is abandoned and retried (None: no limit).
    deadline_seconds: Callable[[Any], float | None] | None = None
    tune: Callable[[Any, ConsumerSpec], ConsumerSpec] | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.batch < 1:
            raise ValueError("concurrency and batch must be at least 1")
        if not self.event_types:
            raise ValueError("a subscription handles at least one event type")


@dataclass(frozen=True, slots=True)
class PeriodicTask:
    """``run(state)`` every ``interval(settings)`` seconds (first run after one interval).

    A failing run is logged and the next one happens on schedule; an interval of 0 or less
    disables the task.
    """

    name: str
    interval: Callable[[Any], float]
    run: Callable[[Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Publication:
    """Event types the service publishes, and on which subject pattern."""

    subject: str
    event_types: tuple[type[EventBase], ...]


class InvalidSettingsError(ValueError):
    """Raised by a settings loader (``ServiceSpec.settings`` that is not a settings class):
    ``main`` prints ``str(exc)`` as it is on stderr and exits 2, so the loader owns the wording
    (the listener keeps its ``fatal configuration error`` line)."""


@dataclass(frozen=True, slots=True)
class ServiceSpec(Generic[StateT]):
    """One service, declared.

    * ``build(ctx)`` makes the service's state from the runtime context (settings, NATS,
      JetStream, Kubernetes client, meter) once the connections exist;
    * ``components(ctx, state)`` lists what to start in order after the health server and
      before the subscribers (watch loops, an RPC server, a work queue, a cache);
    * ``kube_settings(settings)`` says the service needs a Kubernetes client and how to build
      it (``None``: no client);
    * ``ready(state)`` adds a service-specific readiness condition;
    * ``controllers``: what its controllers reconcile, own, watch and keep (ADR 0095); its
      build hands them (``ctx.controllers``) to :class:`~arcflow.common.reconcile.manager.Manager`,
      and the flow table shows their triggers.

    What the spec declares also picks the light path of the runtime (ADR 0070): a spec with no
    ``subscriptions`` connects with plain nats-py (no FastStream broker); ``streams`` narrows the
    JetStream layout to those streams; ``runtime_servers=False`` leaves ``/metrics`` and health
    to the service's components. ``settings`` is a pydantic-settings class or any loader
    callable (which raises :class:`InvalidSettingsError` on bad input).
    """

    name: str
    settings: type[BaseSettings] | Callable[[], Any]
    build: Callable[[ServiceContext], Awaitable[StateT]]
    subscriptions: Sequence[Subscription] = ()
    periodic: Sequence[PeriodicTask] = ()
    rpc: Sequence[RpcEndpoint] = ()
    controllers: Controllers | None = None
    publishes: Sequence[Publication] = ()
    components: Callable[[ServiceContext, StateT], Sequence[Component]] | None = None
    kube_settings: Callable[[Any], KubeSettings] | None = None
    buckets: Sequence[KvBucketSpec] = ()
    #: ``None``: the whole JetStream layout; else only these streams (left at their replicas).
    streams: Sequence[StreamSpec] | None = None
    #: ``False``: no runtime metrics or health server (a component serves its own endpoint).
    runtime_servers: bool = True
    ready: Callable[[StateT], bool] | None = None
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def consumed_types(self) -> set[str]:
        """The event ``type`` strings this service consumes."""
        return {_type_of(t) for s in self.subscriptions for t in s.event_types}

    @property
    def published_types(self) -> set[str]:
        """The event ``type`` strings this service publishes."""
        return {_type_of(t) for p in self.publishes for t in p.event_types}


def _type_of(event_type: type[EventBase]) -> str:
    default = event_type.model_fields["type"].default
    if not isinstance(default, str):
        raise TypeError(f"{event_type.__name__} has no literal type")
    return default


@dataclass
class Part:
    """A :class:`Component` from plain callables (an object with its own start/stop, or a
    cleanup step): ``Part("rpc", server.start, server.stop)``."""

    name: str
    on_start: Callable[[], Awaitable[None]] | None = None
    on_stop: Callable[[], Awaitable[None]] | None = None
    is_healthy: Callable[[], bool] = lambda: True
    is_ready: Callable[[], bool] = lambda: True

    async def start(self) -> None:
        if self.on_start is not None:
            await self.on_start()

    async def stop(self) -> None:
        if self.on_stop is not None:
            await self.on_stop()

    @property
    def healthy(self) -> bool:
        return self.is_healthy()

    @property
    def ready(self) -> bool:
        return self.is_ready()
