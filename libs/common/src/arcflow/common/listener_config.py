"""The listener's ``config.json``: the contract between the reconciler and the listener pod.

The reconciler writes it into ``<listener>-config`` and the listener reads it at start-up
(docs/upstream-behaviour.md#listener-config, #runner-variants). Keys, order and encoding follow
upstream so an upstream
listener image can read what we write, and so a set without variants gets byte-identical bytes
whether or not arcflow knows about variants: ``scale_sets`` is emitted only when present.

Credentials are ``SecretStr``: they never show up in a repr, a log line or an exception.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from arcflow.common.constants import UNBOUNDED_MAX_RUNNERS

REDACTED = "<redacted>"
VAULT_TYPE_AZURE_KEY_VAULT = "azure_key_vault"
SUPPORTED_VAULT_TYPES = ("", VAULT_TYPE_AZURE_KEY_VAULT)

_GO_HTML_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json_dumps(value: Any, *, trailing_newline: bool = False) -> str:
    """Encode like Go's ``encoding/json``: compact, UTF-8, HTML-sensitive characters escaped.

    Key order is the insertion order of the mappings given (Go emits struct fields in declared
    order and map keys sorted; callers build their dicts accordingly). ``json.Encoder`` adds a
    trailing newline, ``json.Marshal`` does not. ``<``, ``>`` and ``&`` can only appear inside
    JSON strings, so replacing them in the encoded text is safe.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for raw, escaped in _GO_HTML_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text + "\n" if trailing_newline else text


class GitHubCredentials(BaseModel):
    """What the controller copies from the GitHub config Secret into ``config.json``.

    Either a token or the GitHub App triple. Values are secrets: kept as ``SecretStr`` and only
    revealed by :meth:`ListenerConfig.to_json`, which builds the Secret payload.
    """

    model_config = ConfigDict(frozen=True)

    github_token: SecretStr = SecretStr("")
    github_app_id: str = ""
    github_app_installation_id: int = 0
    github_app_private_key: SecretStr = SecretStr("")

    @classmethod
    def redacted(cls) -> GitHubCredentials:
        """Placeholder used when the caller has no credentials (``arcflow plan``)."""
        return cls(github_token=SecretStr(REDACTED))

    @property
    def has_app(self) -> bool:
        """Upstream counts an app only if all three parts are set."""
        return bool(
            self.github_app_id
            and self.github_app_installation_id > 0
            and self.github_app_private_key.get_secret_value()
        )

    @property
    def has_token(self) -> bool:
        return bool(self.github_token.get_secret_value())


class AzureKeyVaultConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant_id: str = ""
    client_id: str = ""
    url: str = ""
    certificate_path: str = ""
    proxy: dict[str, Any] | None = None

    def to_ordered(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tenant_id": self.tenant_id,
            "client_id": self.client_id,
            "url": self.url,
            "certificate_path": self.certificate_path,
        }
        if self.proxy is not None:
            out["proxy"] = self.proxy
        return out


class ScaleSetConfig(BaseModel):
    """One entry of ``scale_sets``: a variant's scale set served by this listener."""

    model_config = ConfigDict(frozen=True)

    runner_scale_set_id: int = 0
    runner_scale_set_name: str = ""
    ephemeral_runner_set_name: str = ""
    max_runners: int = UNBOUNDED_MAX_RUNNERS
    min_runners: int = 0
    #: arcflow's scheduled minimums (ADR 0063), written only when there are some.
    scheduled_overrides: list[dict[str, Any]] | None = None

    def to_ordered(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runner_scale_set_id": self.runner_scale_set_id,
            "runner_scale_set_name": self.runner_scale_set_name,
            "ephemeral_runner_set_name": self.ephemeral_runner_set_name,
            "max_runners": self.max_runners,
            "min_runners": self.min_runners,
        }
        if self.scheduled_overrides:
            out["scheduled_overrides"] = self.scheduled_overrides
        return out


class ListenerConfig(BaseModel):
    """``config.json``. Field order is the upstream key order; do not reorder."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    configure_url: str = ""
    vault_type: str = ""
    vault_lookup_key: str = ""
    azure_key_vault: AzureKeyVaultConfig | None = None
    github_app_id: str = ""
    github_app_installation_id: int = 0
    github_app_private_key: SecretStr = SecretStr("")
    github_token: SecretStr = SecretStr("")
    ephemeral_runner_set_namespace: str = ""
    ephemeral_runner_set_name: str = ""
    max_runners: int = UNBOUNDED_MAX_RUNNERS
    min_runners: int = 0
    runner_scale_set_id: int = 0
    runner_scale_set_name: str = ""
    server_root_ca: str = ""
    log_level: str = ""
    log_format: str = ""
    metrics_addr: str = ""
    metrics_endpoint: str = ""
    metrics: dict[str, Any] | None = None
    scale_sets: list[ScaleSetConfig] | None = Field(default=None)
    #: arcflow's shared capacity, priorities and drains (ADR 0062,
    #: ``arcflow.common.capacity.SetCapacity``); absent when the set uses none of them.
    capacity: dict[str, Any] | None = None
    #: The default variant's scheduled minimums (no ``scale_sets``; ADR 0063), when set.
    scheduled_overrides: list[dict[str, Any]] | None = None

    @property
    def credentials(self) -> GitHubCredentials:
        return GitHubCredentials(
            github_token=self.github_token,
            github_app_id=self.github_app_id,
            github_app_installation_id=self.github_app_installation_id,
            github_app_private_key=self.github_app_private_key,
        )

    def to_ordered(self) -> dict[str, Any]:
        """Upstream key order. The embedded app config is omitted entirely in vault mode."""
        out: dict[str, Any] = {
            "configure_url": self.configure_url,
            "vault_type": self.vault_type,
            "vault_lookup_key": self.vault_lookup_key,
        }
        if self.azure_key_vault is not None:
            out["azure_key_vault"] = self.azure_key_vault.to_ordered()
        if not self.vault_type:
            out["github_app_id"] = self.github_app_id
            out["github_app_installation_id"] = self.github_app_installation_id
            out["github_app_private_key"] = self.github_app_private_key.get_secret_value()
            out["github_token"] = self.github_token.get_secret_value()
        out.update(
            {
                "ephemeral_runner_set_namespace": self.ephemeral_runner_set_namespace,
                "ephemeral_runner_set_name": self.ephemeral_runner_set_name,
                "max_runners": self.max_runners,
                "min_runners": self.min_runners,
                "runner_scale_set_id": self.runner_scale_set_id,
                "runner_scale_set_name": self.runner_scale_set_name,
                "server_root_ca": self.server_root_ca,
                "log_level": self.log_level,
                "log_format": self.log_format,
                "metrics_addr": self.metrics_addr,
                "metrics_endpoint": self.metrics_endpoint,
                "metrics": self.metrics,
            }
        )
        if self.scale_sets:
            out["scale_sets"] = [s.to_ordered() for s in self.scale_sets]
        if self.capacity is not None:
            out["capacity"] = self.capacity
        if self.scheduled_overrides:
            out["scheduled_overrides"] = self.scheduled_overrides
        return out

    def to_json(self) -> str:
        """The exact Secret payload: Go ``json.Encoder`` output, trailing newline included."""
        return go_json_dumps(self.to_ordered(), trailing_newline=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> ListenerConfig:
        return cls.model_validate_json(text)

    def effective_scale_sets(self) -> list[ScaleSetConfig]:
        """``scale_sets`` when non-empty, else one entry synthesised from the scalar fields."""
        if self.scale_sets:
            return list(self.scale_sets)
        return [
            ScaleSetConfig(
                runner_scale_set_id=self.runner_scale_set_id,
                runner_scale_set_name=self.runner_scale_set_name,
                ephemeral_runner_set_name=self.ephemeral_runner_set_name,
                max_runners=self.max_runners,
                min_runners=self.min_runners,
                scheduled_overrides=self.scheduled_overrides,
            )
        ]

    def validation_errors(self) -> list[str]:
        """Listener-side checks (docs/upstream-behaviour.md#listener-config, #runner-variants), all
        of them rather than only the first."""
        errors: list[str] = []
        if not self.configure_url:
            errors.append("GitHubConfigUrl is not provided")
        if self.scale_sets:
            if not self.ephemeral_runner_set_namespace:
                errors.append(
                    f"EphemeralRunnerSetNamespace {json.dumps(self.ephemeral_runner_set_namespace)}"
                    " is missing"
                )
            errors.extend(_scale_set_errors(self.scale_sets))
        else:
            if not self.ephemeral_runner_set_namespace or not self.ephemeral_runner_set_name:
                errors.append(
                    f"EphemeralRunnerSetNamespace {json.dumps(self.ephemeral_runner_set_namespace)}"
                    f" or EphemeralRunnerSetName {json.dumps(self.ephemeral_runner_set_name)}"
                    " is missing"
                )
            if self.runner_scale_set_id == 0:
                errors.append(f'RunnerScaleSetId "{self.runner_scale_set_id}" is missing')
            if self.min_runners > self.max_runners:
                errors.append(
                    f'MinRunners "{self.min_runners}" cannot be greater than '
                    f'MaxRunners "{self.max_runners}"'
                )
        if self.vault_type:
            if self.vault_type not in SUPPORTED_VAULT_TYPES:
                errors.append(
                    "VaultType validation failed: unknown vault type: "
                    f"{json.dumps(self.vault_type)}"
                )
            elif not self.vault_lookup_key:
                errors.append(
                    'VaultLookupKey is required when VaultType is set to "azure_key_vault"'
                )
        else:
            creds = self.credentials
            if creds.has_app and creds.has_token:
                errors.append(
                    "AppConfig validation failed: both PAT and GitHub App credentials provided. "
                    "should only provide one"
                )
            elif not creds.has_app and not creds.has_token:
                errors.append(
                    "AppConfig validation failed: no credentials provided: either a PAT or "
                    "GitHub App credentials should be provided"
                )
        return errors


def _scale_set_errors(scale_sets: list[ScaleSetConfig]) -> list[str]:
    errors: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(scale_sets):
        prefix = f"ScaleSets[{i}]"
        if entry.runner_scale_set_id == 0:
            errors.append(f'{prefix}.RunnerScaleSetId "0" is missing')
        if not entry.ephemeral_runner_set_name:
            errors.append(f"{prefix}.EphemeralRunnerSetName is missing")
        if entry.min_runners > entry.max_runners:
            errors.append(
                f'{prefix}.MinRunners "{entry.min_runners}" cannot be greater than '
                f'MaxRunners "{entry.max_runners}"'
            )
        if entry.ephemeral_runner_set_name and entry.ephemeral_runner_set_name in seen:
            errors.append(
                f"{prefix}.EphemeralRunnerSetName "
                f"{json.dumps(entry.ephemeral_runner_set_name)} is duplicated"
            )
        seen.add(entry.ephemeral_runner_set_name)
    return errors
