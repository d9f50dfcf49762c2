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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import SecretStr

from arcflow.common.actions.connection import ServerConnection
from arcflow.common.actions.tls import CABundleError, ca_bundle_from_config_map, ca_config_map_ref
from arcflow.common.builders.proxy import ProxyCredentials, proxy_secret_data
from arcflow.common.kube import CONFIG_MAP, SECRET, Resource
from arcflow.registrar.credentials import CredentialsUnavailableError

Manifest = dict[str, Any]
#: ``(resource, namespace, name) -> object or None``.
ObjectReader = Callable[[Resource, str, str], Awaitable[Manifest | None]]


class ServerConnectionError(CredentialsUnavailableError):
    """The CA ConfigMap or a proxy credential Secret is missing or unusable."""


async def read_server_connection(
    read: ObjectReader, namespace: str, spec: Mapping[str, Any]
) -> ServerConnection:
    """The CA bundle and proxy URLs (credentials embedded) an ARS ``spec`` names; the default
    connection when it names neither."""
    root_ca = await _root_ca(read, namespace, spec.get("githubServerTLS") or {})
    proxy = spec.get("proxy") or {}
    if not (proxy.get("http") or proxy.get("https")):
        return ServerConnection(root_ca_pem=root_ca)
    credentials: dict[str, ProxyCredentials] = {}
    for field in ("http", "https"):
        ref = str((proxy.get(field) or {}).get("credentialSecretRef") or "")
        if ref and ref not in credentials:
            credentials[ref] = await _proxy_credentials(read, namespace, ref)
    try:
        data = proxy_secret_data(proxy, credentials)
    except ValueError as exc:  # BuildError: a relative proxy URL
        raise ServerConnectionError(f"spec.proxy: {exc}") from None
    return ServerConnection(
        root_ca_pem=root_ca,
        http_proxy=data.get("http_proxy", ""),
        https_proxy=data.get("https_proxy", ""),
        no_proxy=tuple(h for h in data.get("no_proxy", "").split(",") if h),
    )


async def _root_ca(read: ObjectReader, namespace: str, tls: Mapping[str, Any]) -> str:
    if not tls:
        return ""
    name, _ = ca_config_map_ref(tls)
    config_map = await read(CONFIG_MAP, namespace, name) if name else None
    try:
        return ca_bundle_from_config_map(config_map, namespace, tls)
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
