"""Parse a githubConfigUrl into its scope (enterprise, organization or repository).

Both validation and the Actions client need this, and both must agree with upstream's rules
(docs/upstream-behaviour.md#actions-auth).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

INVALID_CONFIG_URL = "invalid config URL, should point to an enterprise, org, or repository"
_HOSTED_HOSTS = frozenset({"github.com", "www.github.com", "github.localhost"})


class InvalidGitHubConfigUrlError(ValueError):
    """The URL does not name an enterprise, an organization or a repository."""


@dataclass(frozen=True)
class GitHubConfig:
    url: str
    scheme: str
    host: str
    enterprise: str = ""
    organization: str = ""
    repository: str = ""
    is_hosted: bool = True

    @property
    def scope(self) -> str:
        if self.enterprise:
            return "enterprise"
        if self.repository:
            return "repository"
        return "organization"

    @property
    def api_base(self) -> str:
        """REST base: ``api.<host>`` for hosted, ``<host>/api/v3`` for GHES."""
        if self.is_hosted:
            host = "github.com" if self.host.lower() == "www.github.com" else self.host
            return f"{self.scheme}://api.{host}"
        return f"{self.scheme}://{self.host}/api/v3"

    @property
    def registration_token_path(self) -> str:
        if self.enterprise:
            return f"/enterprises/{self.enterprise}/actions/runners/registration-token"
        if self.repository:
            return (
                f"/repos/{self.organization}/{self.repository}/actions/runners/registration-token"
            )
        return f"/orgs/{self.organization}/actions/runners/registration-token"


def is_hosted_host(host: str, *, environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if "GITHUB_ACTIONS_FORCE_GHES" in env:
        return False
    return host.lower() in _HOSTED_HOSTS or host.endswith(".ghe.com")


def parse_github_config_url(url: str, *, environ: dict[str, str] | None = None) -> GitHubConfig:
    """Parse as upstream does; raise :class:`InvalidGitHubConfigUrlError` otherwise."""
    trimmed = url.strip("/")
    parts = urlsplit(trimmed)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidGitHubConfigUrlError(INVALID_CONFIG_URL)
    host = parts.netloc
    path = parts.path.strip("/")
    segments = path.split("/") if path else []
    hosted = is_hosted_host(parts.hostname, environ=environ)
    base = {"url": trimmed, "scheme": parts.scheme, "host": host, "is_hosted": hosted}
    if len(segments) == 1 and segments[0]:
        return GitHubConfig(**base, organization=segments[0])  # type: ignore[arg-type]
    if len(segments) == 2 and all(segments):
        if segments[0].lower() == "enterprises":
            return GitHubConfig(**base, enterprise=segments[1])  # type: ignore[arg-type]
        return GitHubConfig(**base, organization=segments[0], repository=segments[1])  # type: ignore[arg-type]
    raise InvalidGitHubConfigUrlError(INVALID_CONFIG_URL)
