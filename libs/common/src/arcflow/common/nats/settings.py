"""How a service connects to NATS: settings from the environment, for nats-py and faststream.

Every service reads the same ``ARCFLOW_NATS_*`` variables so Helm charts and the dev stack
configure them one way. The password is a ``SecretStr``: it never shows in a repr or a log.

Every connection also gets its own inbox prefix (``_INBOX_<service>`` unless
``ARCFLOW_NATS_INBOX_PREFIX`` overrides it). Replies to requests (JetStream API answers, PubAcks,
pull fetches, the registrar's JIT configs) travel on the requester's inbox; with a shared
``_INBOX.`` every NATS user would need ``_INBOX.>`` and could read everyone's replies. A
per-service prefix lets the server grant each user only ``_INBOX_<service>.>``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nats.js import JetStreamContext
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from arcflow.common.nats.connection import (
    NatsConnection,
    NatsSettingsError,
    service_inbox_prefix,
    validate_inbox_prefix,
)
from arcflow.common.nats.jetstream import MAX_REPLICAS

if TYPE_CHECKING:
    # faststream is imported where a broker is built, not by processes on plain nats-py.
    from faststream.nats import NatsBroker, NatsSecurity


class NatsSettings(NatsConnection, BaseSettings):
    """:class:`~arcflow.common.nats.connection.NatsConnection` read from
    ``ARCFLOW_NATS_<FIELD>`` environment variables.

    ``replicas`` is how many servers of a NATS cluster keep a copy of each stream and KV
    bucket the services declare (``ARCFLOW_NATS_REPLICAS``, 1 to 5; what declaring does with
    it: :func:`arcflow.common.nats.jetstream.configured_replicas`, docs/operations.md
    "Running on a NATS cluster").
    """

    model_config = SettingsConfigDict(env_prefix="ARCFLOW_NATS_", extra="ignore")

    replicas: int | None = Field(default=None, ge=1, le=MAX_REPLICAS)

    def security(self) -> NatsSecurity | None:
        """The faststream security object matching these settings."""
        from faststream.nats import NatsCredentials, NatsSecurity, NatsUserPassword

        self._check()
        context = self.ssl_context()
        if self.creds_file:
            return NatsCredentials.from_file(self.creds_file, ssl_context=context)
        if self.user:
            password = "" if self.password is None else self.password.get_secret_value()
            return NatsUserPassword(self.user, password, ssl_context=context)
        if context is not None:
            return NatsSecurity(ssl_context=context)
        return None


#: FastStream's own log lines: its per-message lines at DEBUG (``log_level``), so only its
#: warnings and errors pass, such as its task supervisor restarting a pull loop that raised.
FASTSTREAM_LOGGER = "arcflow.faststream"


class OutageEchoFilter(logging.Filter):
    """Drops FastStream's "Connection broken with <error>" warning (with its traceback) when the
    error is the connection itself going away: the socket closed under it (EOF, a stale
    connection, a closed connection, an OS error). The connection's own callbacks report such
    an outage once, as "NATS disconnected; reconnecting" (``connection.py``); FastStream logs
    it too, but only when its error callback runs before it has seen the disconnect, so a
    server restart gave a traceback or not depending on timing. Every other error passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("Connection broken with "):
            return True
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, _OUTAGE_ERRORS)


def _outage_errors() -> tuple[type[BaseException], ...]:
    from nats.errors import ConnectionClosedError, StaleConnectionError

    # UnexpectedEOF is a StaleConnectionError.
    return (StaleConnectionError, ConnectionClosedError, OSError)


_OUTAGE_ERRORS = _outage_errors()


def _faststream_logger() -> logging.Logger:
    """FastStream's logger; its INFO lines (a task callback ran) are dropped, which leaves its
    warnings and errors, less its echo of a connection outage (:class:`OutageEchoFilter`)."""
    logger = logging.getLogger(FASTSTREAM_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    if not any(isinstance(f, OutageEchoFilter) for f in logger.filters):
        logger.addFilter(OutageEchoFilter())
    return logger


def make_broker(settings: NatsSettings, service: str, **broker_kwargs: Any) -> NatsBroker:
    """A faststream ``NatsBroker`` for these settings as ``service``, with faststream's
    per-message lines at DEBUG.

    faststream logs every received/processed message at its ``log_level``
    (docs/upstream-behaviour.md#toolchain-notes), so the broker logs to
    :data:`FASTSTREAM_LOGGER` with ``log_level=DEBUG`` (a caller may pass ``logger=`` and
    ``log_level=``): the lines that remain are its errors, among them a pull loop that raised
    and was restarted (which would otherwise go unseen; docs/service-skeleton.md).
    The broker's connection uses ``service``'s inbox prefix (faststream hands ``inbox_prefix``
    to nats-py). Caveat: faststream's pull subscribers pass their own ``inbox_prefix``
    (default ``_INBOX.``) to ``pull_subscribe``; give them
    ``inbox_prefix=(settings.inbox_prefix_for(service) + ".").encode()`` under restricted
    users. Extra keyword arguments go to ``NatsBroker``.
    """
    from faststream.nats import NatsBroker

    broker_kwargs.setdefault("logger", _faststream_logger())
    broker_kwargs.setdefault("log_level", logging.DEBUG)
    broker_kwargs.setdefault("inbox_prefix", settings.inbox_prefix_for(service))
    if settings.name:
        broker_kwargs.setdefault("name", settings.name)
    return NatsBroker(
        servers=settings.servers,
        security=settings.security(),
        connect_timeout=settings.connect_timeout,
        max_reconnect_attempts=settings.max_reconnect_attempts,
        **broker_kwargs,
    )


def jetstream_of(broker: NatsBroker) -> JetStreamContext:
    """The nats-py JetStream context of a connected faststream broker (for ensure_jetstream, KV)."""
    js: JetStreamContext = broker.config.connection_state.stream
    return js


__all__ = [
    "NatsConnection",
    "NatsSettings",
    "NatsSettingsError",
    "jetstream_of",
    "make_broker",
    "service_inbox_prefix",
    "validate_inbox_prefix",
]
