"""The config.json model: byte-exact round trip, listener-side validation, no secret in repr."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from arcflow.common.listener_config import (
    GitHubCredentials,
    ListenerConfig,
    ScaleSetConfig,
    go_json_dumps,
)

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"


def test_golden_config_json_round_trips_byte_for_byte() -> None:
    for name in ("single.config.json", "variants.config.json"):
        text = (GOLDEN_DIR / name).read_text(encoding="utf-8")
        assert ListenerConfig.from_json(text).to_json() == text


def test_go_json_escapes_html_characters_and_line_separators() -> None:
    assert go_json_dumps({"a": "<&>\u2028é"}) == '{"a":"\\u003c\\u0026\\u003e\\u2028é"}'
    assert go_json_dumps([1], trailing_newline=True) == "[1]\n"


def test_effective_scale_sets_synthesised_in_single_mode() -> None:
    single = ListenerConfig(
        ephemeral_runner_set_name="a", runner_scale_set_id=3, max_runners=9, min_runners=1
    )
    assert single.effective_scale_sets() == [
        ScaleSetConfig(
            runner_scale_set_id=3,
            ephemeral_runner_set_name="a",
            max_runners=9,
            min_runners=1,
        )
    ]
    multi = ListenerConfig(scale_sets=[ScaleSetConfig(runner_scale_set_id=5)])
    assert [s.runner_scale_set_id for s in multi.effective_scale_sets()] == [5]


def test_validation_messages_single_mode() -> None:
    errors = ListenerConfig(min_runners=3, max_runners=2).validation_errors()
    assert errors == [
        "GitHubConfigUrl is not provided",
        'EphemeralRunnerSetNamespace "" or EphemeralRunnerSetName "" is missing',
        'RunnerScaleSetId "0" is missing',
        'MinRunners "3" cannot be greater than MaxRunners "2"',
        "AppConfig validation failed: no credentials provided: either a PAT or GitHub App "
        "credentials should be provided",
    ]


def test_validation_messages_multi_mode_and_credentials() -> None:
    config = ListenerConfig(
        configure_url="https://github.com/acme",
        ephemeral_runner_set_namespace="ci",
        github_token=SecretStr("t"),
        github_app_id="1",
        github_app_installation_id=2,
        github_app_private_key=SecretStr("k"),
        scale_sets=[
            ScaleSetConfig(runner_scale_set_id=0, ephemeral_runner_set_name="x"),
            ScaleSetConfig(
                runner_scale_set_id=2, ephemeral_runner_set_name="x", min_runners=5, max_runners=1
            ),
            ScaleSetConfig(runner_scale_set_id=3),
        ],
    )
    assert config.validation_errors() == [
        'ScaleSets[0].RunnerScaleSetId "0" is missing',
        'ScaleSets[1].MinRunners "5" cannot be greater than MaxRunners "1"',
        'ScaleSets[1].EphemeralRunnerSetName "x" is duplicated',
        "ScaleSets[2].EphemeralRunnerSetName is missing",
        "AppConfig validation failed: both PAT and GitHub App credentials provided. "
        "should only provide one",
    ]
    vault = ListenerConfig(
        configure_url="u",
        ephemeral_runner_set_namespace="n",
        ephemeral_runner_set_name="e",
        runner_scale_set_id=1,
        vault_type="hashicorp",
    )
    assert vault.validation_errors() == [
        'VaultType validation failed: unknown vault type: "hashicorp"'
    ]


def test_secrets_never_in_repr_or_str() -> None:
    config = ListenerConfig(
        github_token=SecretStr("ghp_topsecret"),
        github_app_private_key=SecretStr("-----BEGIN RSA PRIVATE KEY-----"),
    )
    creds = GitHubCredentials(github_token=SecretStr("ghp_topsecret"))
    for text in (repr(config), str(config), repr(creds), str(creds), repr(config.credentials)):
        assert "ghp_topsecret" not in text
        assert "PRIVATE KEY" not in text
    assert '"github_token":"ghp_topsecret"' in config.to_json()
