"""A small Kubernetes client on httpx for processes that make a few writes (the listener).

:class:`~arcflow.common.kube.client.KubeClient` sits on kubernetes_asyncio, which costs
about 100 MB of memory and two CPU seconds of imports for ~860 modules; a listener only sends
merge patches. This client sends exactly what a real API server requires: the path of the
resource (from the shared registry), ``Content-Type: application/merge-patch+json`` on merge
patches (a plain ``application/json`` PATCH is refused with 415), ``Accept:
application/json``, a ``User-Agent``, and the bearer token or client certificate of
:mod:`arcflow.common.kube.lite_auth`. Errors map to the same typed errors as the full client.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import httpx

from arcflow.common.kube.errors import KubeConnectionError, error_from_status
from arcflow.common.kube.lite_auth import (
    ApiConnection,
    in_cluster_connection,
    kubeconfig_connection,
)
from arcflow.common.kube.ratelimit import TokenBucket
from arcflow.common.kube.resources import REGISTRY, Resource, ResourceRegistry

MERGE_PATCH = "application/merge-patch+json"
_JSON = "application/json"

Manifest = dict[str, Any]


class LiteSettings(Protocol):
    """What :meth:`LiteKubeClient.from_settings` reads (``KubeSettings`` fits)."""

    @property
    def kubeconfig(self) -> str | None: ...
    @property
    def context(self) -> str | None: ...
    @property
    def in_cluster(self) -> bool: ...
    @property
    def qps(self) -> float: ...
    @property
    def burst(self) -> int: ...
    @property
    def request_timeout(self) -> float: ...


_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f", ""})


@dataclass(frozen=True)
class LiteKubeSettings:
    """``KubeSettings``' fields and ``ARCFLOW_KUBE_*`` variables, read without pydantic-settings
    (same names and defaults; ``tests`` compare the two)."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    qps: float = 20.0
    burst: int = 40
    request_timeout: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LiteKubeSettings:
        """Raises ``ValueError`` naming the variable (never its value) when one is invalid."""
        env = os.environ if environ is None else environ
        prefix = "ARCFLOW_KUBE_"

        def get(name: str) -> str | None:
            value = env.get(prefix + name.upper())
            return value if value is None else value.strip()

        def number(name: str, kind: type[float] | type[int], default: float) -> float:
            raw = get(name)
            try:
                value = default if raw is None else kind(raw)
            except ValueError:
                raise ValueError(f"{prefix}{name.upper()} must be a number") from None
            minimum_ok = value >= 1 if kind is int else value > 0
            if not minimum_ok:
                raise ValueError(f"{prefix}{name.upper()} is out of range")
            return value

        in_cluster = (get("in_cluster") or "false").lower()
        if in_cluster not in _TRUE | _FALSE:
            raise ValueError(f"{prefix}IN_CLUSTER must be a boolean")
        return cls(
            kubeconfig=get("kubeconfig") or None,
            context=get("context") or None,
            in_cluster=in_cluster in _TRUE,
            qps=float(number("qps", float, cls.qps)),
            burst=int(number("burst", int, cls.burst)),
            request_timeout=float(number("request_timeout", float, cls.request_timeout)),
        )


class LiteKubeClient:
    """GET and merge-patch manifests of registered kinds; ``async with`` closes it."""

    def __init__(
        self,
        connection: ApiConnection,
        *,
        registry: ResourceRegistry = REGISTRY,
        rate_limiter: TokenBucket | None = None,
        request_timeout: float = 30.0,
        user_agent: str = "arcflow",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.connection = connection
        self.registry = registry
        self.rate_limiter = rate_limiter
        verify: Any = connection.ssl_context if connection.ssl_context is not None else False
        self._http = httpx.AsyncClient(
            base_url=connection.server,
            verify=verify,
            timeout=request_timeout,
            headers={"Accept": _JSON, "User-Agent": user_agent},
            transport=transport,
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"LiteKubeClient(server={self.connection.server!r})"

    @classmethod
    def from_settings(
        cls, settings: LiteSettings, *, user_agent: str = "arcflow"
    ) -> LiteKubeClient:
        """In-cluster service account or a kubeconfig, as ``settings`` say."""
        if settings.in_cluster:
            connection = in_cluster_connection()
        else:
            connection = kubeconfig_connection(settings.kubeconfig, settings.context)
        return cls(
            connection,
            rate_limiter=TokenBucket(settings.qps, settings.burst),
            request_timeout=settings.request_timeout,
            user_agent=user_agent,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> LiteKubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def resource(self, ref: Resource | str) -> Resource:
        return ref if isinstance(ref, Resource) else self.registry.by_kind(ref)

    async def _request(
        self, method: str, path: str, body: Any = None, content_type: str | None = None
    ) -> Any:
        if self.rate_limiter is not None:
            await self.rate_limiter.acquire()
        headers = self.connection.auth_headers()
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = content_type or _JSON
        try:
            response = await self._http.request(method, path, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise KubeConnectionError(f"{method} {path} failed: {type(exc).__name__}") from None
        try:
            payload = response.json() if response.content else None
        except ValueError:
            payload = None
        if response.status_code >= 400:
            raise error_from_status(response.status_code, payload)
        return payload

    @staticmethod
    def _typed(obj: Any, resource: Resource) -> Manifest:
        manifest: Manifest = obj if isinstance(obj, dict) else {}
        manifest.setdefault("kind", resource.kind)
        manifest.setdefault("apiVersion", resource.api_version)
        return manifest

    async def get(
        self, resource: Resource | str, name: str, namespace: str | None = None
    ) -> Manifest:
        res = self.resource(resource)
        return self._typed(await self._request("GET", res.path(namespace, name)), res)

    async def patch_merge(
        self,
        resource: Resource | str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> Manifest:
        """RFC 7386 merge patch (``null`` deletes a key)."""
        res = self.resource(resource)
        obj = await self._request("PATCH", res.path(namespace, name), dict(patch), MERGE_PATCH)
        return self._typed(obj, res)

    async def patch_status(
        self,
        resource: Resource | str,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> Manifest:
        """Merge-patch ``.status`` through the status subresource."""
        res = self.resource(resource)
        path = res.path(namespace, name, "status")
        obj = await self._request("PATCH", path, {"status": dict(status)}, MERGE_PATCH)
        return self._typed(obj, res)
