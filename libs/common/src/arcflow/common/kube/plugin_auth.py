"""A kubeconfig whose user runs an exec plugin or an auth provider, loaded by kubernetes_asyncio.

:mod:`arcflow.common.kube.lite_auth` reads tokens, token files, client certificates and basic
auth itself; what it does not run (``exec``: ``aws eks get-token``, ``gke-gcloud-auth-plugin``,
kubelogin; ``auth-provider``: gcp, oidc) is left to kubernetes_asyncio's kubeconfig loader,
through its public API (``load_kube_config`` into a ``Configuration``). The result becomes the
same :class:`~arcflow.common.kube.lite_auth.ApiConnection` every client sends through; nothing
of kubernetes_asyncio's HTTP side is used. This module, and with it kubernetes_asyncio and
aiohttp, is imported only when such a kubeconfig is met.

The credential is renewed as kubernetes_asyncio's own ``refresh_token`` does: at most once a
minute the loader is asked again (``load_from_exec_plugin`` runs the plugin only when its token
has expired or carries no expiry; ``load_gcp_token`` for the gcp provider). Messages name the
failure's type, never a credential.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arcflow.common.kube.lite_auth import (
    TOKEN_REFRESH_SECONDS,
    ApiConnection,
    KubeConfigError,
    PluginAuthRequired,
    _ssl_context,
)

_BEARER = "Bearer "


class _PluginToken:
    """The loader's current bearer token; :meth:`refresh` asks the loader again when due."""

    def __init__(
        self,
        loader: Any,
        configuration: Any,
        plugin: str,
        *,
        every: float = TOKEN_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loader = loader
        self._configuration = configuration
        self._plugin = plugin
        self._every = every
        self._clock = clock
        self._checked = clock()
        self._lock = asyncio.Lock()

    def __call__(self) -> str:
        value = str(self._configuration.api_key.get("BearerToken") or "")
        return value[len(_BEARER) :] if value.startswith(_BEARER) else value

    async def refresh(self) -> None:
        if self._clock() - self._checked < self._every:
            return
        async with self._lock:
            if self._clock() - self._checked < self._every:
                return
            try:
                if self._plugin == "exec":
                    await self._loader.load_from_exec_plugin()
                elif self._plugin == "auth-provider:gcp":
                    await self._loader.load_gcp_token()
            except Exception as exc:
                raise KubeConfigError(
                    f"renewing the kubeconfig's {self._plugin} credential failed: "
                    f"{type(exc).__name__}"
                ) from None
            finally:
                self._checked = self._clock()
            token = getattr(self._loader, "token", None)
            if token:
                self._configuration.api_key["BearerToken"] = token

    def __repr__(self) -> str:
        return f"_PluginToken({self._plugin!r})"


async def plugin_connection(
    required: PluginAuthRequired, *, refresh_every: float = TOKEN_REFRESH_SECONDS
) -> ApiConnection:
    """Load the kubeconfig ``required`` names with kubernetes_asyncio and return its connection
    (its token renewed, when due, at most every ``refresh_every`` seconds)."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import load_kube_config

    configuration = Configuration()
    try:
        loader = await load_kube_config(
            config_file=str(required.path),
            context=required.context,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:
        raise KubeConfigError(
            f"kubeconfig {required.path}: loading its {required.plugin} user failed: "
            f"{type(exc).__name__}"
        ) from None
    return configuration_connection(
        configuration, loader, required.plugin, refresh_every=refresh_every
    )


def configuration_connection(
    configuration: Any,
    loader: Any,
    plugin: str,
    *,
    refresh_every: float = TOKEN_REFRESH_SECONDS,
) -> ApiConnection:
    """A loaded kubernetes_asyncio ``Configuration`` as an :class:`ApiConnection`."""
    server = str(configuration.host or "").rstrip("/")
    if not server:
        raise KubeConfigError("the loaded kubeconfig names no server")
    connection = ApiConnection(server=server)
    if server.startswith("https://"):

        def read(path: Any) -> bytes | None:
            return Path(str(path)).read_bytes() if path else None

        try:
            cert_data, key_data = read(configuration.cert_file), read(configuration.key_file)
            connection.ssl_context = _ssl_context(
                ca_file=str(configuration.ssl_ca_cert) if configuration.ssl_ca_cert else None,
                insecure=not configuration.verify_ssl,
                cert=(cert_data, key_data) if cert_data and key_data else None,
            )
        except (OSError, ValueError) as exc:
            raise KubeConfigError(
                f"the loaded kubeconfig's TLS settings are unusable: {type(exc).__name__}"
            ) from None
    token = _PluginToken(loader, configuration, plugin, every=refresh_every)
    if token():
        connection.token = token
        connection.refresh = token.refresh
    elif not connection.ssl_context or not configuration.cert_file:
        raise KubeConfigError(f"the kubeconfig's {plugin} user gave no token or certificate")
    if configuration.proxy:
        connection.proxy = str(configuration.proxy)
    if configuration.tls_server_name:
        connection.tls_server_name = str(configuration.tls_server_name)
    return connection
