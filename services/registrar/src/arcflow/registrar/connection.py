"""The GitHub server connection of an AutoscalingRunnerSet: its private CA (``githubServerTLS``)
and proxy (``proxy``), resolved for the Actions client as upstream's controllers do
(docs/upstream-behaviour.md#actions-connection).

Reading goes through a caller-given reader (a GET for a converge, a watch for JIT requests),
so this module decides only what is read and what is wrong with it. Every error names the
ConfigMap or Secret and the key, never a value.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import SecretStr

from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.tls import CABundleError, ca_bundle_from_config_map, ca_config_map_ref
from arcflow.common.builders.proxy import ProxyCredentials, proxy_secret_data
from arcflow.common.kube import CONFIG_MAP, SECRET, Resource
from arcflow.common.models import AutoscalingRunnerSetSpec, GitHubServerTLSConfig, KubeModel
from arcflow.registrar.credentials import CredentialsUnavailableError

Manifest = dict[str, Any]
#: ``(resource, namespace, name) -> object or None``.
ObjectReader = Callable[[Resource, str, str], Awaitable[Manifest | None]]


class ServerConnectionError(CredentialsUnavailableError):
    """The CA ConfigMap or a proxy credential Secret is missing or unusable."""


async def read_server_connection(
    read: ObjectReader, namespace: str, spec: AutoscalingRunnerSetSpec | None
) -> ServerConnection:
    """The CA bundle and proxy URLs (credentials embedded) an ARS ``spec`` names; the default
    connection when it names neither (or there is no spec: the ARS is gone)."""
    if spec is None:
        return ServerConnection()
    root_ca = await _root_ca(read, namespace, spec.github_server_tls)
    proxy = spec.proxy
    if proxy is None or not any(_given(server) for server in (proxy.http, proxy.https)):
        return ServerConnection(root_ca_pem=root_ca)
    credentials: dict[str, ProxyCredentials] = {}
    for server in (proxy.http, proxy.https):
        ref = server.credential_secret_ref if server is not None else ""
        if ref and ref not in credentials:
            credentials[ref] = await _proxy_credentials(read, namespace, ref)
    try:
        # The common builder reads the spec's document form (as the reconciler's builders
        # hand it over): only the fields that were set.
        written = proxy.model_dump(by_alias=True, exclude_unset=True, mode="json")
        data = proxy_secret_data(written, credentials)
    except ValueError as exc:  # BuildError: a relative proxy URL
        raise ServerConnectionError(f"spec.proxy: {exc}") from None
    return ServerConnection(
        root_ca_pem=root_ca,
        http_proxy=data.get("http_proxy", ""),
        https_proxy=data.get("https_proxy", ""),
        no_proxy=tuple(h for h in data.get("no_proxy", "").split(",") if h),
    )


def _given(part: KubeModel | None) -> bool:
    """The part is in the spec with at least one field (an empty ``{}`` names nothing)."""
    return part is not None and bool(part.model_fields_set or part.model_extra)


async def _root_ca(read: ObjectReader, namespace: str, tls: GitHubServerTLSConfig | None) -> str:
    if tls is None or not _given(tls):
        return ""
    written = tls.model_dump(by_alias=True, exclude_unset=True, mode="json")
    name, _ = ca_config_map_ref(written)
    config_map = await read(CONFIG_MAP, namespace, name) if name else None
    try:
        return ca_bundle_from_config_map(config_map, namespace, written)
    except CABundleError as exc:
        raise ServerConnectionError(str(exc)) from None


async def _proxy_credentials(read: ObjectReader, namespace: str, name: str) -> ProxyCredentials:
    where = f"proxy credential Secret {namespace}/{name}"
    secret = await read(SECRET, namespace, name)
    if secret is None:
        raise ServerConnectionError(f"{where} (spec.proxy) not found")
    data = secret.get("data") or {}
    values: dict[str, str] = {}
    for key in ("username", "password"):
        try:
            values[key] = base64.b64decode(str(data.get(key) or ""), validate=True).decode()
        except (binascii.Error, ValueError):
            raise ServerConnectionError(f"{where} key {key} is not valid base64") from None
    return ProxyCredentials(username=values["username"], password=SecretStr(values["password"]))
