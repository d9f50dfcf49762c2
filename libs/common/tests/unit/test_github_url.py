"""Config URL parsing follows upstream's table (spec/actions-protocol.md §1.2-1.3)."""

from __future__ import annotations

import pytest

from arcflow.common.github_url import InvalidGitHubConfigUrlError, parse_github_config_url


@pytest.mark.parametrize(
    ("url", "scope", "org", "repo", "enterprise", "hosted"),
    [
        ("https://github.com/org/repo", "repository", "org", "repo", "", True),
        ("https://github.com/org/repo/", "repository", "org", "repo", "", True),
        ("https://github.com/org", "organization", "org", "", "", True),
        (
            "https://github.com/enterprises/my-enterprise/",
            "enterprise",
            "",
            "",
            "my-enterprise",
            True,
        ),
        ("https://github.com/Enterprises/e", "enterprise", "", "", "e", True),
        ("https://www.github.com/org/", "organization", "org", "", "", True),
        ("https://github.localhost/org", "organization", "org", "", "", True),
        ("https://my-ghes.com/org/", "organization", "org", "", "", False),
        ("https://my-ghes.ghe.com/org/", "organization", "org", "", "", True),
        ("http://127.0.0.1:8080/org", "organization", "org", "", "", False),
    ],
)
def test_parse_scopes(
    url: str, scope: str, org: str, repo: str, enterprise: str, hosted: bool
) -> None:
    cfg = parse_github_config_url(url, environ={})
    assert (cfg.scope, cfg.organization, cfg.repository, cfg.enterprise, cfg.is_hosted) == (
        scope,
        org,
        repo,
        enterprise,
        hosted,
    )


@pytest.mark.parametrize(
    "url",
    ["https://github.com/", "https://github.com", "https://github.com/some/random/path", "", "org"],
)
def test_invalid_urls(url: str) -> None:
    with pytest.raises(InvalidGitHubConfigUrlError, match="should point to an enterprise"):
        parse_github_config_url(url, environ={})


@pytest.mark.parametrize(
    ("url", "environ", "api_base"),
    [
        ("https://github.com/org/repo", {}, "https://api.github.com"),
        ("https://www.github.com/org/repo", {}, "https://api.github.com"),
        ("http://github.localhost/org/repo", {}, "http://api.github.localhost"),
        ("https://my-instance.com/org/repo", {}, "https://my-instance.com/api/v3"),
        ("https://github.ghe.com/org/repo", {}, "https://api.github.ghe.com"),
        (
            "https://test.ghe.com/org/repo",
            {"GITHUB_ACTIONS_FORCE_GHES": "1"},
            "https://test.ghe.com/api/v3",
        ),
    ],
)
def test_api_base(url: str, environ: dict[str, str], api_base: str) -> None:
    assert parse_github_config_url(url, environ=environ).api_base == api_base


def test_registration_token_paths() -> None:
    assert (
        parse_github_config_url("https://github.com/o/r", environ={}).registration_token_path
        == "/repos/o/r/actions/runners/registration-token"
    )
    assert (
        parse_github_config_url("https://github.com/o", environ={}).registration_token_path
        == "/orgs/o/actions/runners/registration-token"
    )
    assert (
        parse_github_config_url(
            "https://github.com/enterprises/e", environ={}
        ).registration_token_path
        == "/enterprises/e/actions/runners/registration-token"
    )
