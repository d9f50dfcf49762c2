"""The one HTTP transport to the API server: ``httpx.AsyncClient`` pools per client, built once.

Everything a request needs is settled at construction from an
:class:`~arcflow.common.kube.lite_auth.ApiConnection`: the server, the TLS context (CA, client
certificate, insecure flag), the proxy (the kubeconfig's ``proxy-url``, else the environment's
``HTTPS_PROXY``/``NO_PROXY``, which httpx reads once here and never per request), the pool
limits, the user agent. Per request only the credential is asked for (a file token is re-read
once a minute; a plugin's token renewed when due), the client-side token bucket is waited on,
and a failure is mapped to the typed errors of :mod:`arcflow.common.kube.errors`. Messages
carry the method, the path and the failure's type, never a header or a body.

Requests go through :data:`REQUEST_POOLS` small connection pools, each to the one with the
fewest requests in flight, and watches through a pool of their own (ADR 0116): httpcore looks
at every pooled connection, and runs a check per idle one against all the others, each time a
request starts or ends, so one pool of dozens of connections cost a burst more CPU than the
requests themselves.
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
#: A list or watch of metadata only (``PartialObjectMetadata``: no spec, status or data), with
#: plain JSON after it for a server that cannot convert (it then sends whole objects).
METADATA_ONLY_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, " + JSON
METADATA_ONLY_WATCH = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, " + JSON

#: Request pools: 8 of 13 connections, about the 100 kubernetes_asyncio's one pool allowed, all
#: kept alive between requests (a burst reuses them instead of new TLS handshakes).
REQUEST_POOLS = 8
REQUEST_POOL_LIMITS = httpx.Limits(
    max_connections=13, max_keepalive_connections=13, keepalive_expiry=30
)
#: Watches hold a connection each for as long as they stream; they open and close rarely.
WATCH_POOL_LIMITS = httpx.Limits(
    max_connections=100, max_keepalive_connections=100, keepalive_expiry=30
)


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

        def pool(limits: httpx.Limits) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                base_url=connection.server,
                verify=verify,
                timeout=request_timeout,
                limits=limits,
                headers={"Accept": JSON, "User-Agent": user_agent},
                transport=transport,
                proxy=connection.proxy,
                # httpx reads the environment's proxies here, once; no request looks again.
                trust_env=connection.proxy is None,
            )

        self._pools = tuple(pool(REQUEST_POOL_LIMITS) for _ in range(REQUEST_POOLS))
        self._in_flight = [0] * REQUEST_POOLS
        self._watches = pool(WATCH_POOL_LIMITS)

    async def aclose(self) -> None:
        for client in (*self._pools, self._watches):
            await client.aclose()

    def _pick(self) -> int:
        """The request pool with the fewest requests in flight (the first such: a client
        that sends one request at a time keeps to one connection)."""
        in_flight = self._in_flight
        return in_flight.index(min(in_flight))

    async def _headers(self, content_type: str | None, accept: str | None) -> dict[str, str]:
        if self.rate_limiter is not None:
            await self.rate_limiter.acquire()
        if self.connection.refresh is not None:
            await self.connection.refresh()
        headers = self.connection.auth_headers()
        if content_type is not None:
            headers["Content-Type"] = content_type
        if accept is not None:
            headers["Accept"] = accept
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str | None = None,
    ) -> Any:
        """Send one request and return its decoded JSON body (``None`` when empty or not JSON);
        an HTTP error status raises its typed error. ``accept`` replaces the JSON default."""
        content = None if body is None else json.dumps(body).encode()
        headers = await self._headers(content_type if content is not None else None, accept)
        index = self._pick()
        self._in_flight[index] += 1
        try:
            response = await self._pools[index].request(
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
        finally:
            self._in_flight[index] -= 1
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
        accept: str | None = None,
    ) -> httpx.Response:
        """Open a streaming GET (a watch); the caller reads and closes the response. The
        connection times out after ``request_timeout``, a read after ``read_timeout`` (None:
        never)."""
        headers = await self._headers(None, accept)
        connect = self.request_timeout
        request = self._watches.build_request(
            "GET",
            path,
            params=list(query),
            headers=headers,
            timeout=httpx.Timeout(connect, read=read_timeout),
            extensions=self._extensions or None,
        )
        try:
            response = await self._watches.send(request, stream=True)
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
