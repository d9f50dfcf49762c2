"""A service's declared request/reply endpoint (part of its spec; its own module so that the
runtime context can carry the spec's endpoints without importing the spec)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RpcEndpoint:
    """A core-NATS request/reply subject the service answers, declared once: the runtime hands
    the spec's endpoints to the service (``ServiceContext.rpc``), whose RPC component serves
    exactly these (it refuses to start on an endpoint it has no handler for, or a handler no
    endpoint declares), parses each request with ``request``; the flow tables of
    docs/events.md and the AsyncAPI document are generated from the same declaration.

    ``carries_secret``: the reply holds a credential (a JIT config), the reason these calls
    are never persisted (a test checks it against the reply model's secret fields).
    """

    subject: str
    request: type[Any]
    reply: type[Any]
    description: str = ""
    carries_secret: bool = False

    @property
    def op(self) -> str:
        """The operation's name: the subject's last token (``arc.rpc.registrar.jitconfig``)."""
        return self.subject.rsplit(".", 1)[-1]
