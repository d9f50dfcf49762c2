"""config.json reading and upstream's validation messages (§4.1, §6.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.listener_config import ListenerConfig
from arcflow.listener.config import (
    ConfigError,
    load_config,
    nats_settings,
    parse_config,
    scale_set_targets,
    validate_config,
    variant_of,
)

TOKEN = "ghp_supersecrettokenvalue123"


def base(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "configure_url": "https://github.com/octo",
        "github_token": TOKEN,
        "ephemeral_runner_set_namespace": "ci",
        "ephemeral_runner_set_name": "arc",
        "runner_scale_set_id": 7,
        "runner_scale_set_name": "arc",
        "min_runners": 0,
        "max_runners": 10,
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}  # None: leave the key out


def check(data: dict[str, Any]) -> str | None:
    return validate_config(ListenerConfig.model_validate(data))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"configure_url": ""}, "GitHubConfigUrl is not provided"),
        (
            {"ephemeral_runner_set_namespace": ""},
            'EphemeralRunnerSetNamespace "" or EphemeralRunnerSetName "arc" is missing',
        ),
        (
            {"ephemeral_runner_set_name": ""},
            'EphemeralRunnerSetNamespace "ci" or EphemeralRunnerSetName "" is missing',
        ),
        ({"runner_scale_set_id": 0}, 'RunnerScaleSetId "0" is missing'),
        (
            {"min_runners": 5, "max_runners": 2},
            'MinRunners "5" cannot be greater than MaxRunners "2"',
        ),
        (
            {"vault_type": "hashicorp"},
            'VaultType validation failed: unknown vault type: "hashicorp"',
        ),
        (
            {"vault_type": "azure_key_vault"},
            'VaultLookupKey is required when VaultType is set to "azure_key_vault"',
        ),
        (
            {"github_app_id": "1", "github_app_installation_id": 2, "github_app_private_key": "k"},
            "AppConfig validation failed: both PAT and GitHub App credentials provided. "
            "should only provide one",
        ),
        (
            {"github_token": ""},
            "AppConfig validation failed: no credentials provided: either a PAT or GitHub App "
            "credentials should be provided",
        ),
        ({"github_token": None}, "AppConfig validation failed: missing app config"),
        ({"max_runners": -1, "min_runners": -2}, "MaxRunners -1 of scale set 7 must be between 0"),
    ],
)
def test_single_mode_messages(overrides: dict[str, Any], message: str) -> None:
    result = check(base(**overrides))
    assert result is not None
    assert result.startswith(message)


def test_first_failure_wins() -> None:
    assert check(base(configure_url="", runner_scale_set_id=0)) == (
        "GitHubConfigUrl is not provided"
    )


def test_valid_single_config_passes() -> None:
    assert check(base()) is None


def multi(**overrides: Any) -> dict[str, Any]:
    sets = [
        {"runner_scale_set_id": 1, "ephemeral_runner_set_name": "arc-cpu", "max_runners": 5},
        {"runner_scale_set_id": 2, "ephemeral_runner_set_name": "arc-gpu", "max_runners": 2},
    ]
    return base(scale_sets=sets, runner_scale_set_id=0, ephemeral_runner_set_name="", **overrides)


def test_multi_mode_skips_scalar_checks() -> None:
    assert check(multi()) is None


@pytest.mark.parametrize(
    ("index", "entry", "message"),
    [
        (1, {"runner_scale_set_id": 0}, 'ScaleSets[1].RunnerScaleSetId "0" is missing'),
        (0, {"ephemeral_runner_set_name": ""}, "ScaleSets[0].EphemeralRunnerSetName is missing"),
        (
            1,
            {"min_runners": 3, "max_runners": 1},
            'ScaleSets[1].MinRunners "3" cannot be greater than MaxRunners "1"',
        ),
        (
            1,
            {"ephemeral_runner_set_name": "arc-cpu"},
            'ScaleSets[1].EphemeralRunnerSetName "arc-cpu" is duplicated',
        ),
    ],
)
def test_multi_mode_messages(index: int, entry: dict[str, Any], message: str) -> None:
    data = multi()
    data["scale_sets"][index].update(entry)
    assert check(data) == message


def test_multi_mode_namespace_message() -> None:
    assert check(multi(ephemeral_runner_set_namespace="")) == (
        'EphemeralRunnerSetNamespace "" is missing'
    )


def test_agrees_with_the_shared_model_on_the_first_failure() -> None:
    for data in (base(configure_url=""), base(runner_scale_set_id=0), multi(), base()):
        model = ListenerConfig.model_validate(data)
        errors = model.validation_errors()
        assert validate_config(model) == (errors[0] if errors else None)


def test_effective_scale_sets_and_owners() -> None:
    single = ListenerConfig.model_validate(base())
    (target,) = scale_set_targets(single, "pod-x")
    assert (target.owner, target.variant, target.ars) == ("pod-x", "", "arc")
    assert target.jobs_subject == "arc.jobs.ci.arc._"
    several = ListenerConfig.model_validate(multi())
    targets = scale_set_targets(several, "pod-x")
    assert [t.owner for t in targets] == ["pod-x-1", "pod-x-2"]
    assert [t.variant for t in targets] == ["cpu", "gpu"]
    assert [t.scale_subject for t in targets] == ["arc.scale.ci.arc.cpu", "arc.scale.ci.arc.gpu"]
    assert [t.jobs_subject for t in targets] == ["arc.jobs.ci.arc.cpu", "arc.jobs.ci.arc.gpu"]


def test_variant_of() -> None:
    assert variant_of("arc", "arc") == ""
    assert variant_of("arc", "arc-gpu-large") == "gpu-large"
    assert variant_of("arc", "other") == ""


def test_load_config_reads_the_env_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base()) + "\n")
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    config, raw = load_config()
    assert config.runner_scale_set_id == 7
    assert raw["configure_url"] == "https://github.com/octo"


def test_load_config_errors_name_the_reason_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LISTENER_CONFIG_PATH", raising=False)
    with pytest.raises(ConfigError, match="LISTENER_CONFIG_PATH is not set"):
        load_config()
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(base(runner_scale_set_id=0)))
    with pytest.raises(ConfigError, match='RunnerScaleSetId "0" is missing') as info:
        load_config(bad)
    assert TOKEN not in str(info.value)
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps(base(max_runners="lots")))
    with pytest.raises(ConfigError, match="max_runners") as info:
        load_config(typed)
    assert TOKEN not in str(info.value)
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_config("{")


def test_vault_mode_is_reported_as_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "vault.json"
    path.write_text(json.dumps(base(vault_type="azure_key_vault", vault_lookup_key="k")))
    with pytest.raises(ConfigError, match="not supported by the arcflow listener"):
        load_config(path)


def test_nats_settings_env_wins_over_config_keys() -> None:
    raw = {"nats": {"url": "nats://from-config:4222", "user": "cfg"}}
    settings = nats_settings(raw, environ={"ARCFLOW_NATS_URL": "nats://from-env:4222"})
    assert settings.servers == ["nats://from-env:4222"]
    assert settings.user == "cfg"
    assert nats_settings({}, environ={}).servers == ["nats://127.0.0.1:4222"]
    with pytest.raises(ConfigError, match="must be an object"):
        nats_settings({"nats": "x"}, environ={})
