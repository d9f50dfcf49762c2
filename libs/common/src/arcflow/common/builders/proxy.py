"""Proxy Secret data and the env vars that read it (listener pod and runner pods alike)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, SecretStr

from arcflow.common.builders.common import BuildError
from arcflow.common.listener_config import REDACTED

PROXY_KEYS = (("http", "http_proxy"), ("https", "https_proxy"))
NO_PROXY_KEY = "no_proxy"


class ProxyCredentials(BaseModel):
    """``username``/``password`` of a proxy credential Secret; the password never prints."""

    model_config = ConfigDict(frozen=True)

    username: str
    password: SecretStr


def _with_userinfo(url: str, creds: ProxyCredentials) -> str:
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        raise BuildError(f"proxy url {url!r} must be an absolute URL")
    userinfo = (
        f"{quote(creds.username, safe='')}:{quote(creds.password.get_secret_value(), safe='')}"
    )
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))


def proxy_secret_data(
    proxy: Mapping[str, Any],
    credentials: Mapping[str, ProxyCredentials] | None = None,
) -> dict[str, str]:
    """``http_proxy``/``https_proxy`` (credentials embedded as userinfo) and ``no_proxy``.

    ``credentials`` maps a ``credentialSecretRef`` name to what that Secret holds; a reference
    with no entry gets ``<redacted>`` placeholders (``arcflow plan`` reads no Secrets).
    """
    data: dict[str, str] = {}
    for field, key in PROXY_KEYS:
        server = proxy.get(field)
        if not server:
            continue
        url = server.get("url") or ""
        ref = server.get("credentialSecretRef") or ""
        if ref:
            creds = (credentials or {}).get(ref) or ProxyCredentials(
                username=REDACTED, password=SecretStr(REDACTED)
            )
            url = _with_userinfo(url, creds)
        data[key] = url
    data[NO_PROXY_KEY] = ",".join(proxy.get("noProxy") or [])
    return data


def proxy_env(proxy: Mapping[str, Any] | None, secret_name: str) -> list[dict[str, Any]]:
    """Env vars reading the proxy Secret, each only when that part of the proxy is set."""
    if not proxy:
        return []
    env: list[dict[str, Any]] = []
    for field, key in PROXY_KEYS:
        if proxy.get(field):
            env.append(_secret_env(key, secret_name, key))
    if proxy.get("noProxy"):
        env.append(_secret_env(NO_PROXY_KEY, secret_name, NO_PROXY_KEY))
    return env


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
