"""What the runtime hands a service's ``build``: settings and the connections it opened."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js import JetStreamContext
    from opentelemetry.metrics import Meter

    from arcflow.common.kube import KubeClient
    from arcflow.common.reconcile.declare import Controllers
    from arcflow.common.service.endpoints import RpcEndpoint


@dataclass
class ServiceContext:
    """The running service's settings, NATS connection, JetStream, Kubernetes client, meter.

    ``kube`` is ``None`` unless the spec declares ``kube_settings``. ``overrides`` carries
    test-only replacements (e.g. an Actions client factory with fast retries); production
    code paths read them with a default. ``fatal(exc)`` stops the process with exit code 1
    (a background loop that must never end has ended). ``rpc`` is the spec's declared RPC
    endpoints, which the service's RPC component serves (and nothing else); ``controllers``
    its declared controllers, which its build hands the controller runtime (ADR 0095).
    """

    name: str
    settings: Any
    nc: NatsClient
    js: JetStreamContext
    meter: Meter
    instance: str
    kube: KubeClient | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    fatal: Callable[[BaseException], None] = lambda exc: None
    rpc: Sequence[RpcEndpoint] = ()
    controllers: Controllers | None = None

    def require_controllers(self) -> Controllers:
        """The declared controllers (the spec declared ``controllers``)."""
        if self.controllers is None:
            raise RuntimeError(f"service {self.name} declared no controllers")
        return self.controllers

    def require_kube(self) -> KubeClient:
        """The Kubernetes client (the spec declared ``kube_settings``)."""
        if self.kube is None:
            raise RuntimeError(f"service {self.name} did not declare kube_settings")
        return self.kube
