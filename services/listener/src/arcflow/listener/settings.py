"""The listener's settings: ``config.json`` plus the environment, checked before anything starts.

The service runtime calls :func:`load_settings` (the spec's settings loader, ADR 0070). Every
configuration error is found here, so it ends the process with exit code 2 and upstream's
message before NATS or GitHub is contacted: the file and its validation, the NATS settings, the
scale sets' names on NATS, the standby replica variables, the ``ARCFLOW_KUBE_*`` variables and
the decision heartbeat.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.listener_config import ListenerConfig
from arcflow.common.nats import NatsConnection
from arcflow.common.service.spec import InvalidSettingsError
from arcflow.listener.app import ListenerOptions, decision_heartbeat, default_kube_settings
from arcflow.listener.config import (
    ConfigError,
    hostname,
    load_config,
    nats_settings,
    scale_set_targets,
)
from arcflow.listener.lease import LeaseConfigError, ReplicaSettings
from arcflow.listener.supervisor import FatalError

#: ``config.json``'s ``log_level`` (upstream's names) -> logging level name; others: INFO.
_LEVELS = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "warning": "WARNING",
           "error": "ERROR"}  # fmt: skip


@dataclass(frozen=True)
class ListenerSettings:
    """The checked config and the options with NATS, Kubernetes and replicas filled in."""

    config: ListenerConfig
    raw: Mapping[str, Any]
    options: ListenerOptions

    @property
    def nats(self) -> NatsConnection:
        """What the runtime connects with (``ARCFLOW_NATS_*`` over the ``nats`` config key)."""
        if self.options.nats is None:  # resolve() fills it
            raise RuntimeError("ListenerSettings without NATS settings: use resolve()")
        return self.options.nats

    @property
    def log_level(self) -> str:
        return _LEVELS.get(self.config.log_level.lower(), "INFO")

    @property
    def log_json(self) -> bool:
        return self.config.log_format.lower() == "json"

    @classmethod
    def resolve(
        cls,
        config: ListenerConfig,
        raw: Mapping[str, Any] | None = None,
        options: ListenerOptions | None = None,
    ) -> ListenerSettings:
        """Fill what ``options`` leaves open from the environment; :class:`ConfigError`
        names what is wrong."""
        options = options or ListenerOptions()
        raw = dict(raw or {})
        environ = dict(os.environ if options.environ is None else options.environ)
        try:
            replicas = options.replicas or ReplicaSettings.from_environ(environ)
            kube = options.kube_settings or default_kube_settings(environ)
        except (LeaseConfigError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        scale_set_targets(config, options.host or hostname())  # names valid on NATS
        heartbeat = decision_heartbeat(options)
        resolved = dataclasses.replace(
            options,
            nats=options.nats or nats_settings(raw, options.environ),
            kube_settings=kube,
            replicas=replicas,
            decision_heartbeat=heartbeat,
        )
        return cls(config, raw, resolved)


def load_settings() -> ListenerSettings:
    """``$LISTENER_CONFIG_PATH`` and the environment, or the process's exit-2 message."""
    try:
        config, raw = load_config()
        return ListenerSettings.resolve(config, raw)
    except (ConfigError, FatalError) as exc:
        raise InvalidSettingsError(f"arcflow listener: fatal configuration error: {exc}") from None
