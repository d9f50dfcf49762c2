"""NATS connection settings as a plain model: what ``nats.connect`` needs, with no reading
of the environment.

:class:`~arcflow.common.nats.settings.NatsSettings` (every service) adds the
``ARCFLOW_NATS_*`` environment on top through pydantic-settings; a process that merges its
settings itself (the listener: ``config.json`` plus the environment) validates this model and
does not import pydantic-settings (about 4 MiB, ADR 0016).

Every connection also gets its own inbox prefix (``_INBOX_<service>`` unless
``inbox_prefix`` overrides it). Replies to requests (JetStream API answers, PubAcks, pull
fetches, the registrar's JIT configs) travel on the requester's inbox; with a shared
``_INBOX.`` every NATS user would need ``_INBOX.>`` and could read everyone's replies. A
per-service prefix lets the server grant each user only ``_INBOX_<service>.>``.
"""

from __future__ import annotations

import re
import ssl
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator


class NatsSettingsError(ValueError):
    """The NATS settings are inconsistent (e.g. a TLS cert without its key)."""


#: One subject token: printable, no whitespace, no wildcard (``*``, ``>``) and no dot.
_TOKEN = re.compile(r"[^\s.*>]+")


def validate_inbox_prefix(prefix: str) -> str:
    """``prefix`` if it can start an inbox subject (``<prefix>.<nuid>``); else ``ValueError``.

    Dot-separated tokens, each non-empty, without whitespace or wildcards: a wildcard would
    turn the reply subject into a pattern, and an empty token is not a valid subject.
    """
    if not prefix:
        raise ValueError("inbox prefix must not be empty")
    bad = [token for token in prefix.split(".") if not _TOKEN.fullmatch(token)]
    if bad:
        raise ValueError(
            f"inbox prefix {prefix!r} is not a subject prefix: tokens must be non-empty and "
            "contain no whitespace, '*' or '>'"
        )
    return prefix


def service_inbox_prefix(service: str) -> str:
    """The default inbox prefix of ``service``: ``_INBOX_<service>`` (one subject token).

    Raises ``ValueError`` when ``service`` is not a single token (empty, a dot, a wildcard).
    """
    if not _TOKEN.fullmatch(service):
        raise ValueError(f"service identity {service!r} must be one subject token")
    return f"_INBOX_{service}"


class NatsConnection(BaseModel):
    """Connection settings (``NatsSettings`` reads them from ``ARCFLOW_NATS_<FIELD>``).

    ``url`` may list several servers separated by commas. Authenticate with either
    ``creds_file`` (a NATS credentials file) or ``user``/``password``. TLS is used when
    ``tls_ca`` is set or the URL scheme is ``tls://``; ``tls_cert``+``tls_key`` add a client
    certificate. ``inbox_prefix`` overrides the per-service ``_INBOX_<service>`` default (the
    NATS permissions must then grant ``<inbox_prefix>.>``).
    """

    model_config = ConfigDict(extra="ignore")

    url: str = "nats://127.0.0.1:4222"
    user: str | None = None
    password: SecretStr | None = None
    creds_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    name: str | None = None
    connect_timeout: int = 5
    max_reconnect_attempts: int = -1
    inbox_prefix: str | None = None

    @field_validator("inbox_prefix")
    @classmethod
    def _valid_inbox_prefix(cls, value: str | None) -> str | None:
        return None if value is None else validate_inbox_prefix(value)

    @field_validator("url")
    @classmethod
    def _non_empty_url(cls, value: str) -> str:
        if not [s for s in value.split(",") if s.strip()]:
            raise ValueError("url must name at least one server")
        return value

    @property
    def servers(self) -> list[str]:
        """The server URLs, in order."""
        return [s.strip() for s in self.url.split(",") if s.strip()]

    def _check(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise NatsSettingsError("tls_cert and tls_key must be set together")
        if self.creds_file and (self.user or self.password):
            raise NatsSettingsError("use either creds_file or user/password, not both")
        if self.password is not None and not self.user:
            raise NatsSettingsError("password given without user")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context when TLS is configured, else ``None``."""
        self._check()
        wants_tls = bool(self.tls_ca or self.tls_cert) or any(
            s.startswith("tls://") for s in self.servers
        )
        if not wants_tls:
            return None
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca)
        if self.tls_cert and self.tls_key:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    def inbox_prefix_for(self, service: str) -> str:
        """The inbox prefix ``service`` connects with: the override, else ``_INBOX_<service>``."""
        default = service_inbox_prefix(service)
        return self.inbox_prefix or default

    def connect_options(self, service: str) -> dict[str, Any]:
        """Keyword arguments for ``nats.connect(**options)`` as ``service`` (contains the
        password: don't log).

        ``service`` is the connection's identity (``watcher``, ``registrar``, ``reconciler``,
        ``listener``, ``auditor``, ``devstack``): it picks the inbox prefix its NATS user may
        subscribe to. Required on purpose, so no connection falls back to the shared
        ``_INBOX.``.
        """
        self._check()
        options: dict[str, Any] = {
            "servers": self.servers,
            "connect_timeout": self.connect_timeout,
            "max_reconnect_attempts": self.max_reconnect_attempts,
            "inbox_prefix": self.inbox_prefix_for(service),
        }
        if self.name:
            options["name"] = self.name
        if self.user:
            options["user"] = self.user
        if self.password is not None:
            options["password"] = self.password.get_secret_value()
        if self.creds_file:
            options["user_credentials"] = self.creds_file
        context = self.ssl_context()
        if context is not None:
            options["tls"] = context
        return options
