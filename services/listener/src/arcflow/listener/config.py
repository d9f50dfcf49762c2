"""Reading and validating the listener's ``config.json``
(docs/upstream-behaviour.md#listener-config, #runner-variants).

The file is the contract with the reconciler (``arcflow.common.listener_config`` models it);
this module adds what only the listener needs: upstream's ``Validate`` (first failure wins, with
upstream's wording), the per-scale-set identity the pump and worker work with (ARS, variant,
subjects, durable consumer), and the NATS settings (environment first, optional config keys
second).
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from arcflow.common import subjects
from arcflow.common.constants import UNBOUNDED_MAX_RUNNERS
from arcflow.common.events import EventKeys
from arcflow.common.listener_config import (
    SUPPORTED_VAULT_TYPES,
    VAULT_TYPE_AZURE_KEY_VAULT,
    ListenerConfig,
    ScaleSetConfig,
)
from arcflow.common.nats import NatsConnection
from arcflow.common.schedules import ScheduledOverride, ScheduleError, parse_resolved

CONFIG_PATH_ENV = "LISTENER_CONFIG_PATH"
NATS_CONFIG_KEY = "nats"
"""Optional ``config.json`` key: ``{"url": ..., "user": ..., ...}`` (NatsConnection fields)."""


class ConfigError(Exception):
    """The configuration cannot work: the process must say why and exit non-zero."""


#: The config.json keys of upstream's app config (a PAT or a GitHub App).
CREDENTIAL_KEYS = frozenset(
    {"github_token", "github_app_id", "github_app_installation_id", "github_app_private_key"}
)


def validate_config(config: ListenerConfig) -> str | None:
    """Upstream ``Config.Validate`` plus the listener's own bounds: the first failure, or None.

    Order and wording follow docs/upstream-behaviour.md#listener-config/#runner-variants. With
    ``scale_sets`` the scalar id/name/min/max checks
    are replaced by per-entry checks; the namespace is required either way.
    """
    ns = config.ephemeral_runner_set_namespace
    if not config.configure_url:
        return "GitHubConfigUrl is not provided"
    if config.scale_sets:
        if not ns:
            return f"EphemeralRunnerSetNamespace {json.dumps(ns)} is missing"
        problem = _validate_scale_sets(config.scale_sets)
        if problem:
            return problem
    else:
        name = config.ephemeral_runner_set_name
        if not ns or not name:
            return (
                f"EphemeralRunnerSetNamespace {json.dumps(ns)} or "
                f"EphemeralRunnerSetName {json.dumps(name)} is missing"
            )
        if config.runner_scale_set_id == 0:
            return f'RunnerScaleSetId "{config.runner_scale_set_id}" is missing'
        if config.min_runners > config.max_runners:
            return (
                f'MinRunners "{config.min_runners}" cannot be greater than '
                f'MaxRunners "{config.max_runners}"'
            )
    if config.vault_type:
        if config.vault_type not in SUPPORTED_VAULT_TYPES:
            vault_type = json.dumps(config.vault_type)
            return f"VaultType validation failed: unknown vault type: {vault_type}"
        if not config.vault_lookup_key:
            return (
                "VaultLookupKey is required when VaultType is set to "
                f'"{VAULT_TYPE_AZURE_KEY_VAULT}"'
            )
        return None
    if not CREDENTIAL_KEYS & config.model_fields_set:
        # Upstream's config has no app config object at all when no credential key is given.
        return "AppConfig validation failed: missing app config"
    creds = config.credentials
    if creds.has_app and creds.has_token:
        return (
            "AppConfig validation failed: both PAT and GitHub App credentials provided. "
            "should only provide one"
        )
    if not creds.has_app and not creds.has_token:
        return (
            "AppConfig validation failed: no credentials provided: either a PAT or "
            "GitHub App credentials should be provided"
        )
    return _validate_listener_bounds(config)


def _validate_scale_sets(scale_sets: list[ScaleSetConfig]) -> str | None:
    seen: set[str] = set()
    for i, entry in enumerate(scale_sets):
        prefix = f"ScaleSets[{i}]"
        if entry.runner_scale_set_id == 0:
            return f'{prefix}.RunnerScaleSetId "0" is missing'
        if not entry.ephemeral_runner_set_name:
            return f"{prefix}.EphemeralRunnerSetName is missing"
        if entry.min_runners > entry.max_runners:
            return (
                f'{prefix}.MinRunners "{entry.min_runners}" cannot be greater than '
                f'MaxRunners "{entry.max_runners}"'
            )
        if entry.ephemeral_runner_set_name in seen:
            return (
                f"{prefix}.EphemeralRunnerSetName "
                f"{json.dumps(entry.ephemeral_runner_set_name)} is duplicated"
            )
        seen.add(entry.ephemeral_runner_set_name)
    return None


def _validate_listener_bounds(config: ListenerConfig) -> str | None:
    """``listener.New``'s checks (docs/upstream-behaviour.md#listener-session), per effective scale
    set."""
    for entry in config.effective_scale_sets():
        if entry.runner_scale_set_id < 0:
            return "scaleSetID is required"
        if not 0 <= entry.max_runners <= UNBOUNDED_MAX_RUNNERS:
            return (
                f"MaxRunners {entry.max_runners} of scale set {entry.runner_scale_set_id} "
                f"must be between 0 and {UNBOUNDED_MAX_RUNNERS}"
            )
        if entry.min_runners < 0:
            return (
                f"MinRunners {entry.min_runners} of scale set {entry.runner_scale_set_id} "
                "must not be negative"
            )
    return None


def parse_config(text: str | bytes) -> tuple[ListenerConfig, dict[str, Any]]:
    """Decode ``config.json``: the typed config and the raw object (for optional extra keys).

    Raises :class:`ConfigError` with the reason; pydantic's own text would quote input values
    (which may be a token), so only locations and reasons are kept.
    """
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config.json is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config.json must hold a JSON object, got {type(raw).__name__}")
    try:
        config = ListenerConfig.model_validate(raw)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigError(f"config.json is malformed: {reasons}") from None
    return config, raw


def load_config(path: str | Path | None = None) -> tuple[ListenerConfig, dict[str, Any]]:
    """Read and validate the file named by ``path`` or ``$LISTENER_CONFIG_PATH``."""
    location = path if path is not None else os.environ.get(CONFIG_PATH_ENV, "")
    if not location:
        raise ConfigError(f"{CONFIG_PATH_ENV} is not set: the path of config.json is required")
    try:
        text = Path(location).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {location}: {exc.strerror or exc}") from None
    config, raw = parse_config(text)
    problem = validate_config(config)
    if problem:
        raise ConfigError(f"invalid config file {location}: {problem}")
    if config.vault_type:
        raise ConfigError(
            f"vault type {config.vault_type!r} is not supported by the arcflow listener: "
            "the reconciler must copy the credentials into config.json"
        )
    return config, raw


def nats_settings(
    raw_config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> NatsConnection:
    """NATS settings: ``ARCFLOW_NATS_*`` variables win over the optional ``nats`` config key."""
    from_config = raw_config.get(NATS_CONFIG_KEY) or {}
    if not isinstance(from_config, dict):
        raise ConfigError(f"config key {NATS_CONFIG_KEY!r} must be an object")
    env = dict(os.environ if environ is None else environ)
    prefix = "ARCFLOW_NATS_"
    known = NatsConnection.model_fields
    merged: dict[str, Any] = {k: v for k, v in from_config.items() if k in known}
    for field in NatsConnection.model_fields:
        value = env.get(prefix + field.upper())
        if value is not None:
            merged[field] = value
    merged.setdefault("name", "arcflow-listener")
    try:
        return NatsConnection.model_validate(merged)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigError(f"NATS settings are invalid: {reasons}") from None


def hostname() -> str:
    """The pod name (upstream's ``os.Hostname()``), or a random UUID if it cannot be read."""
    try:
        name = socket.gethostname()
    except OSError:
        name = ""
    return name or str(uuid.uuid4())


def variant_of(ars_name: str, ers_name: str) -> str:
    """The variant an ERS belongs to: ``""`` for ``<ars>``, ``v`` for ``<ars>-v``.

    ``config.json`` carries the ARS name (``runner_scale_set_name``) and each ERS name; the
    ERS of a named variant is ``<ars>-<variant>`` (``naming.ephemeral_runner_set_name``).
    """
    if ers_name == ars_name:
        return ""
    if ars_name and ers_name.startswith(ars_name + "-"):
        return ers_name[len(ars_name) + 1 :]
    return ""


@dataclass(frozen=True)
class ScaleSetTarget:
    """Everything one pump and one worker need to know about their scale set."""

    scale_set_id: int
    namespace: str
    ars: str
    variant: str
    ephemeral_runner_set_name: str
    min_runners: int
    max_runners: int
    owner: str
    #: Windows with another minimum (ADR 0063); the worker evaluates them on every decision.
    scheduled_overrides: tuple[ScheduledOverride, ...] = ()

    @property
    def label(self) -> str:
        """Human name for logs: ``ns/ers (id)``."""
        return f"{self.namespace}/{self.ephemeral_runner_set_name} ({self.scale_set_id})"

    @property
    def event_keys(self) -> EventKeys:
        """What every event about this scale set is about (pump's batches, worker's decisions)."""
        return EventKeys(
            namespace=self.namespace,
            ars=self.ars,
            variant=self.variant,
            scale_set_id=self.scale_set_id,
        )

    @property
    def jobs_subject(self) -> str:
        return subjects.jobs_subject(self.namespace, self.ars, self.variant)

    @property
    def scale_subject(self) -> str:
        return subjects.scale_subject(self.namespace, self.ars, self.variant)


def scale_set_targets(config: ListenerConfig, host: str) -> list[ScaleSetTarget]:
    """``EffectiveScaleSets()`` turned into targets, with upstream's session owner names.

    With several scale sets the owner is ``<host>-<id>`` so sibling sessions are distinct;
    with one it stays the bare host name (single-set semantics,
    docs/upstream-behaviour.md#runner-variants).
    """
    entries = config.effective_scale_sets()
    multi = bool(config.scale_sets)
    namespace = config.ephemeral_runner_set_namespace
    targets = []
    for entry in entries:
        ars = config.runner_scale_set_name or entry.ephemeral_runner_set_name
        try:
            variant = variant_of(ars, entry.ephemeral_runner_set_name)
            target = ScaleSetTarget(
                scale_set_id=entry.runner_scale_set_id,
                namespace=namespace,
                ars=ars,
                variant=variant,
                ephemeral_runner_set_name=entry.ephemeral_runner_set_name,
                min_runners=entry.min_runners,
                max_runners=entry.max_runners,
                owner=f"{host}-{entry.runner_scale_set_id}" if multi else host,
                scheduled_overrides=parse_resolved(entry.scheduled_overrides),
            )
            target.jobs_subject  # noqa: B018 - validates the subject tokens early
        except subjects.InvalidSubjectTokenError as exc:
            raise ConfigError(
                f"scale set {entry.runner_scale_set_id} cannot be named on NATS: {exc}"
            ) from None
        except ScheduleError as exc:
            raise ConfigError(
                f"scale set {entry.runner_scale_set_id} has an unusable scheduled override: {exc}"
            ) from None
        targets.append(target)
    return targets
