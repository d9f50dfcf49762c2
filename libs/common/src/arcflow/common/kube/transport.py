"""The one HTTP transport to the API server: an ``httpx.AsyncClient`` per client, built once.

Everything a request needs is settled at construction from an
:class:`~arcflow.common.kube.lite_auth.ApiConnection`: the server, the TLS context (CA, client
certificate, insecure flag), the proxy (the kubeconfig's ``proxy-url``, else the environment's
``HTTPS_PROXY``/``NO_PROXY``, which httpx reads once here and never per request), the pool
limits, the user agent. Per request only the credential is asked for (a file token is re-read
once a minute; a plugin's token renewed when due), the client-side token bucket is waited on,
and a failure is mapped to the typed errors of :mod:`arcflow.common.kube.errors`. Messages
carry the method, the path and the failure's type, never a header or a body.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from arcflow.common.kube.errors import KubeConnectionError, error_from_status
from arcflow.common.kube.lite_auth import ApiConnection
from arcflow.common.kube.ratelimit import TokenBucket

JSON = "application/json"

#: As many connections at once as kubernetes_asyncio's pool allowed (watches hold one each),
#: all of them kept alive between requests (a burst reuses them instead of new TLS handshakes).
POOL_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=30)


class KubeTransport:
    """Send requests to one API server; :meth:`aclose` closes the connection pool."""

    def __init__(
        self,
        connection: ApiConnection,
        *,
        rate_limiter: TokenBucket | None = None,
        request_timeout: float = 30.0,
        user_agent: str = "arcflow",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.connection = connection
        self.rate_limiter = rate_limiter
        self.request_timeout = request_timeout
        verify: Any = connection.ssl_context if connection.ssl_context is not None else False
        self._extensions: dict[str, Any] = (
            {"sni_hostname": connection.tls_server_name} if connection.tls_server_name else {}
        )
        self._http = httpx.AsyncClient(
            base_url=connection.server,
            verify=verify,
            timeout=request_timeout,
            limits=POOL_LIMITS,
            headers={"Accept": JSON, "User-Agent": user_agent},
            transport=transport,
            proxy=connection.proxy,
            # httpx reads the environment's proxies here, once; no request looks again.
            trust_env=connection.proxy is None,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        if self.rate_limiter is not None:
            await self.rate_limiter.acquire()
        if self.connection.refresh is not None:
            await self.connection.refresh()
        headers = self.connection.auth_headers()
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        """Send one request and return its decoded JSON body (``None`` when empty or not JSON);
        an HTTP error status raises its typed error."""
        content = None if body is None else json.dumps(body).encode()
        headers = await self._headers(content_type if content is not None else None)
        try:
            response = await self._http.request(
                method,
                path,
                params=list(query) or None,
                content=content,
                headers=headers,
                extensions=self._extensions or None,
            )
        except httpx.HTTPError as exc:
            raise KubeConnectionError(
                f"{method} {path} failed: {type(exc).__name__}: {exc}"
            ) from None
        payload = _decode(response.content)
        if response.status_code >= 400:
            raise error_from_status(response.status_code, payload)
        return payload

    async def stream(
        self,
        path: str,
        query: Sequence[tuple[str, str]],
        *,
        read_timeout: float | None,
    ) -> httpx.Response:
        """Open a streaming GET (a watch); the caller reads and closes the response. The
        connection times out after ``request_timeout``, a read after ``read_timeout`` (None:
        never)."""
        headers = await self._headers(None)
        connect = self.request_timeout
        request = self._http.build_request(
            "GET",
            path,
            params=list(query),
            headers=headers,
            timeout=httpx.Timeout(connect, read=read_timeout),
            extensions=self._extensions or None,
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise KubeConnectionError(f"GET {path} failed: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            try:
                raw = await response.aread()
            except httpx.HTTPError:
                raw = b""
            finally:
                await response.aclose()
            raise error_from_status(response.status_code, _decode(raw))
        return response


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
