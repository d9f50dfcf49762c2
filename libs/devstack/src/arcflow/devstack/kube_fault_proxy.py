"""A fault proxy in front of a real kube-apiserver, for the faults a real server will not make
on demand: refused requests (409, 500, 429 with ``Retry-After``), cut watches, slow answers.

``async with KubeFaultProxy.for_control_plane(plane) as proxy: proxy.write_kubeconfig(path)``
gives a kubeconfig that points at the proxy (plain HTTP on 127.0.0.1). Every request goes on
to the real server over TLS, verified against its CA:

- a request with an ``Authorization`` header is forwarded with that header and without a
  client certificate, so a ServiceAccount token keeps its own identity and RBAC
  (``write_kubeconfig(path, token=...)``);
- a request without one is forwarded with the upstream's client certificate (the admin's for
  :meth:`KubeFaultProxy.for_control_plane`).

The test controls have the shape of the emulator's (``inject_error``, ``clear_errors``,
``drop_watches``, ``open_watches``, ``requests``), so a test moves from the emulator to the
real server with small changes. Matching is by Kubernetes verb and resource (``pods``,
``ephemeralrunnersets/status``) as the emulator's is, optionally by namespace, name prefix or a
glob on the path. Refusals carry a real ``Status`` body; streamed (watch) answers are
forwarded chunk by chunk. The proxy records method, path, query, Content-Type and the answer's
status of each request, never a body or a header value (either may hold a secret).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import ssl
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import yaml
from aiohttp import web

if TYPE_CHECKING:
    from arcflow.devstack.control_plane import ControlPlane

log = logging.getLogger(__name__)

KUBE_VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)
_WATCH_TRUE = {"true", "1"}
# Hop-by-hop headers (RFC 9110 section 7.6.1) and those aiohttp sets itself.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
    }
)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """What a test may assert about a request: never its body or a header value but the
    Content-Type. ``status`` is the answer's (``None`` when the upstream gave none)."""

    method: str
    path: str
    query: str
    content_type: str | None
    status: int | None = None


@dataclass(frozen=True, slots=True)
class RequestTarget:
    """A request in Kubernetes terms: ``resource`` is the plural, with ``/subresource``."""

    verb: str
    resource: str | None
    namespace: str | None
    name: str | None
    path: str


def parse_target(method: str, path: str, query: Any, body_name: str | None = None) -> RequestTarget:
    """Pure: the verb, resource, namespace and name of a request to the Kubernetes API."""
    parts = [p for p in path.split("/") if p]
    rest: list[str] = []
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    namespace: str | None = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else None
    name = rest[1] if len(rest) > 1 else None
    if resource is not None and len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    if resource == "namespaces" and name is not None and namespace is None:
        namespace = name
    if name is None:
        if method == "GET":
            verb = "watch" if str(query.get("watch", "")).lower() in _WATCH_TRUE else "list"
        else:
            verb = {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
            name = body_name if method == "POST" else None
    else:
        verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
            method, method.lower()
        )
    return RequestTarget(verb, resource, namespace, name, path)


@dataclass(eq=False)
class _Rule:
    """What a fault applies to: every given part must match."""

    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name_prefix: str | None = None
    path: str | None = None
    times: int | None = None
    hits: int = 0
    removed: bool = False

    def _check(self) -> None:
        if self.verb is not None and self.verb not in KUBE_VERBS:
            raise ValueError(f"verb must be one of {sorted(KUBE_VERBS)}, not {self.verb!r}")
        if self.resource is not None and self.resource != self.resource.lower():
            raise ValueError(f"resource must be a lower-case plural like 'pods': {self.resource!r}")
        if self.times is not None and self.times < 1:
            raise ValueError(f"times must be at least 1 (or None for always), not {self.times}")
        if (self.verb, self.resource, self.path) == (None, None, None):
            raise ValueError("give at least one of verb, resource or path")

    def remove(self) -> None:
        """Stop applying (idempotent)."""
        self.removed = True

    @property
    def exhausted(self) -> bool:
        return self.removed or (self.times is not None and self.hits >= self.times)

    def matches(self, target: RequestTarget) -> bool:
        if self.exhausted:
            return False
        if self.verb is not None and target.verb != self.verb:
            return False
        if self.resource is not None and target.resource != self.resource:
            return False
        if self.namespace is not None and target.namespace != self.namespace:
            return False
        if self.name_prefix is not None and not (target.name or "").startswith(self.name_prefix):
            return False
        return self.path is None or fnmatch.fnmatchcase(target.path, self.path)


_R = TypeVar("_R", bound=_Rule)


@dataclass(eq=False)
class InjectedError(_Rule):
    """A scripted refusal: matching requests get ``status`` with a ``Status`` body and are not
    forwarded. ``retry_after`` adds that header (a 429's or 503's)."""

    status: int = 500
    reason: str = "InternalError"
    message: str = "injected by the fault proxy"
    retry_after: int | None = None

    def __post_init__(self) -> None:
        self._check()
        if not 400 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP error code (400-599), not {self.status}")
        if not self.reason:
            raise ValueError("reason is required (e.g. Conflict, InternalError)")

    def response(self, target: RequestTarget) -> web.Response:
        details: dict[str, Any] = {}
        if target.name:
            details["name"] = target.name
        if target.resource:
            plural, _, _ = target.resource.partition("/")
            details["kind"] = plural
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": details,
            "code": self.status,
        }
        headers = {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}
        return web.Response(
            status=self.status,
            body=json.dumps(body).encode(),
            content_type="application/json",
            headers=headers,
        )


@dataclass(eq=False)
class Delay(_Rule):
    """Matching requests wait ``seconds`` before they are forwarded (``None``: until the
    delay is removed); removing it releases the requests it holds at once. ``hits`` counts
    the requests it has held."""

    seconds: float | None = 1.0
    _released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def __post_init__(self) -> None:
        self._check()
        if self.seconds is not None and self.seconds < 0:
            raise ValueError(f"seconds must not be negative, not {self.seconds}")

    def remove(self) -> None:
        super().remove()
        self._released.set()

    async def wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), self.seconds)


@dataclass(eq=False)
class _OpenWatch:
    target: RequestTarget
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    abrupt: bool = False


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards to: the server URL, its CA, and the client certificate used
    for requests that carry no ``Authorization`` header (``None``: forwarded anonymously)."""

    server: str
    ca: Path
    client_cert: Path | None = None
    client_key: Path | None = None

    def ssl_context(self, *, with_client_cert: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_client_cert and self.client_cert is not None:
            context.load_cert_chain(str(self.client_cert), str(self.client_key or self.client_cert))
        return context


class KubeFaultProxy:
    """An aiohttp reverse proxy on 127.0.0.1 in front of a real kube-apiserver."""

    def __init__(self, upstream: Upstream, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream
        self.host = host
        self.port = port
        self.requests: deque[RecordedRequest] = deque(maxlen=20_000)
        self._errors: list[InjectedError] = []
        self._delays: list[Delay] = []
        self._watches: set[_OpenWatch] = set()
        self._runner: web.AppRunner | None = None
        self._as_admin: aiohttp.ClientSession | None = None
        self._as_caller: aiohttp.ClientSession | None = None

    @classmethod
    def for_control_plane(cls, plane: ControlPlane, **kwargs: Any) -> KubeFaultProxy:
        """In front of ``plane``; requests without a token go on as its admin."""
        creds = plane.credentials
        return cls(Upstream(plane.url, creds.ca, creds.admin_cert, creds.admin_key), **kwargs)

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port == 0:
            raise RuntimeError("the fault proxy is not started")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> KubeFaultProxy:
        if self._runner is not None:
            return self
        timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=None)
        self._as_admin = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.upstream.ssl_context(with_client_cert=True)),
            timeout=timeout,
            auto_decompress=True,
        )
        self._as_caller = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.upstream.ssl_context(with_client_cert=False)),
            timeout=timeout,
            auto_decompress=True,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = int(runner.addresses[0][1])
        self._runner = runner
        log.info("kube fault proxy on %s in front of %s", self.url, self.upstream.server)
        return self

    async def stop(self) -> None:
        self.drop_watches()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        for session in (self._as_admin, self._as_caller):
            if session is not None:
                await session.close()
        self._as_admin = self._as_caller = None

    async def __aenter__(self) -> KubeFaultProxy:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- kubeconfig -----------------------------------------------------------------------

    def kubeconfig(self, *, token: str | None = None, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig for the proxy: with ``token``, as that identity; without, the requests
        go on with the upstream's client certificate (the admin's)."""
        name = "arcflow-fault-proxy"
        user: dict[str, Any] = {"token": token} if token is not None else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": user}],
            "contexts": [
                {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
            ],
            "current-context": name,
        }

    def write_kubeconfig(
        self, path: str | Path, *, token: str | None = None, namespace: str = "default"
    ) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            yaml.safe_dump(self.kubeconfig(token=token, namespace=namespace), sort_keys=False)
        )
        target.chmod(0o600)
        return target

    # --- test controls --------------------------------------------------------------------

    def inject_error(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name_prefix: str | None = None,
        path: str | None = None,
        status: int,
        reason: str,
        message: str = "injected by the fault proxy",
        times: int | None = None,
        retry_after: int | None = None,
    ) -> InjectedError:
        """Answer matching requests with ``status`` (not forwarded), as the emulator's
        ``inject_error`` does: e.g. ``verb="patch", resource="ephemeralrunnersets",
        status=409, reason="Conflict", times=2``. ``path`` is a glob on the request path.
        ``times`` limits the refusals (``None``: until ``handle.remove()`` or
        :meth:`clear_errors`); the first matching injection wins."""
        injected = InjectedError(
            verb=verb,
            resource=resource,
            namespace=namespace,
            name_prefix=name_prefix,
            path=path,
            times=times,
            status=status,
            reason=reason,
            message=message,
            retry_after=retry_after,
        )
        self._errors.append(injected)
        return injected

    def delay(
        self,
        seconds: float | None,
        *,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name_prefix: str | None = None,
        path: str | None = None,
        times: int | None = None,
    ) -> Delay:
        """Hold matching requests ``seconds`` before forwarding them (``None``: until
        ``handle.remove()``, which releases the held ones at once), e.g. hold every watch
        while a test writes what the watcher must later catch up on."""
        delay = Delay(
            verb=verb,
            resource=resource,
            namespace=namespace,
            name_prefix=name_prefix,
            path=path,
            times=times,
            seconds=seconds,
        )
        self._delays.append(delay)
        return delay

    def clear_errors(self) -> None:
        """Remove every injected error and delay."""
        for rule in [*self._errors, *self._delays]:
            rule.remove()
        self._errors.clear()
        self._delays.clear()

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def watches(self, resource: str | None = None) -> list[RequestTarget]:
        """The open watches (of ``resource``, if given)."""
        return [w.target for w in self._watches if resource in (None, w.target.resource)]

    def drop_watches(self, *, abrupt: bool = False, resource: str | None = None) -> int:
        """End open watch streams: cleanly (the chunked answer ends) or ``abrupt`` (the
        connection is reset mid-stream). Returns how many."""
        count = 0
        for watch in list(self._watches):
            if resource is not None and watch.target.resource != resource:
                continue
            watch.abrupt = abrupt
            watch.cut.set()
            self._watches.discard(watch)
            count += 1
        return count

    # --- forwarding -----------------------------------------------------------------------

    @staticmethod
    def _first(rules: list[_R], target: RequestTarget) -> _R | None:
        rules[:] = [r for r in rules if not r.exhausted]
        for rule in rules:
            if rule.matches(target):
                rule.hits += 1
                return rule
        return None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        body_name: str | None = None
        if request.method == "POST" and body:
            with contextlib.suppress(ValueError):
                metadata = (json.loads(body) or {}).get("metadata")
                if isinstance(metadata, dict):
                    body_name = str(metadata.get("name") or metadata.get("generateName") or "")
        target = parse_target(request.method, request.path, request.query, body_name or None)
        record = RecordedRequest(
            request.method,
            request.path,
            request.query_string,
            request.headers.get("Content-Type"),
        )
        delay = self._first(self._delays, target)
        if delay is not None:
            await delay.wait()
        injected = self._first(self._errors, target)
        if injected is not None:
            log.info("fault proxy: %s %s for %s %s", injected.status, injected.reason,
                     target.verb, target.resource)  # fmt: skip
            self._record(record, injected.status)
            return injected.response(target)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        caller = "Authorization" in request.headers
        session = self._as_caller if caller else self._as_admin
        assert session is not None, "the fault proxy is not started"
        url = self.upstream.server.rstrip("/") + request.path_qs
        try:
            upstream = await session.request(
                request.method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                skip_auto_headers=("Accept-Encoding", "Content-Type"),
            )
        except (aiohttp.ClientError, OSError) as exc:
            # The server is down (e.g. being restarted): the client sees a refused connection.
            self._record(record, None)
            log.info("fault proxy: upstream unreachable (%s)", type(exc).__name__)
            if request.transport is not None:
                request.transport.abort()
            raise web.HTTPBadGateway() from None
        self._record(record, upstream.status)
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        if target.verb != "watch" or upstream.status != 200:
            try:
                payload = await upstream.read()
            finally:
                upstream.release()
            return web.Response(status=upstream.status, body=payload, headers=out_headers)
        return await self._stream(request, upstream, out_headers, target)

    def _record(self, record: RecordedRequest, status: int | None) -> None:
        self.requests.append(
            RecordedRequest(record.method, record.path, record.query, record.content_type, status)
        )

    async def _stream(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        headers: dict[str, str],
        target: RequestTarget,
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        watch = _OpenWatch(target)
        self._watches.add(watch)

        async def pump() -> None:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)

        pumping = asyncio.ensure_future(pump())
        cutting = asyncio.ensure_future(watch.cut.wait())
        try:
            await asyncio.wait({pumping, cutting}, return_when=asyncio.FIRST_COMPLETED)
            if cutting.done():
                pumping.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pumping
                if watch.abrupt and request.transport is not None:
                    request.transport.abort()
                    return response
            else:
                cutting.cancel()
                with contextlib.suppress(aiohttp.ClientError, ConnectionError):
                    pumping.result()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write_eof()
            return response
        finally:
            for task in (pumping, cutting):
                task.cancel()
            self._watches.discard(watch)
            upstream.close()
