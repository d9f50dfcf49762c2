"""A Kubernetes API proxy on loopback: counts every request per client, verb and resource, and
on demand answers chosen requests with errors, cuts open watches, or expires resumed watches.

One proxy listens on one port per client (``watcher``, ``reconciler``, ``kubelet``, ...), so a
request is attributed to the client whose kubeconfig names that port. Upstream is the
emulator (plain HTTP) or a real kube-apiserver (TLS with the cluster's CA). A request that
carries its own ``Authorization`` (a listener's ServiceAccount token) is forwarded with it and
without a client certificate, so the server authenticates the token, not the proxy; any other
request is sent with the admin client certificate of the upstream kubeconfig.

The faults are those a real server gives under trouble, made on purpose:

* :meth:`ApiProxy.inject`: the next ``times`` requests of a verb and resource answer a
  ``Status`` with that code (409 Conflict, 500 InternalError ...), never reaching the server;
* :meth:`ApiProxy.drop_watches`: every open watch response is cut (abruptly: the TCP
  connection closes mid-stream, as when an apiserver dies);
* :meth:`ApiProxy.expire_before`: watches that resume from an older resourceVersion get the
  ``410 Expired`` ERROR event a compacted etcd gives, until they list again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import yaml
from aiohttp import web

from arcflow.devstack.nats_server import free_port

log = logging.getLogger(__name__)


def classify(method: str, path: str, query: str) -> tuple[str, str]:
    """(verb, resource) of one API request, as the audit log names them (``watch``,
    ``list``, ``get``, ``create`` ...; ``pods/binding`` for a subresource)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] not in (["api"], ["apis"]):
        return method.lower(), path  # /version, /healthz, discovery roots
    # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if rest else "?"
    sub = rest[2] if len(rest) >= 3 else ""
    named = len(rest) >= 2
    if method == "GET":
        watching = "watch=" in query and "watch=false" not in query
        verb = "watch" if watching else ("get" if named else "list")
    else:
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(
            method, method.lower()
        )
    if sub:
        resource = f"{resource}/{sub}"
    return verb, resource


@dataclass
class Fault:
    """``times`` requests of ``verb`` on ``resource`` answered with ``status``; ``hits``
    counts those answered so far."""

    verb: str
    resource: str
    status: int
    reason: str
    message: str
    times: int
    hits: int = 0

    def matches(self, verb: str, resource: str) -> bool:
        return self.hits < self.times and verb == self.verb and resource == self.resource

    def body(self) -> bytes:
        return json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": self.message,
                "reason": self.reason,
                "code": self.status,
            }
        ).encode()


@dataclass
class Upstream:
    """Where the proxy forwards to: the server and, for TLS, the CA and admin certificate."""

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> Upstream:
        """The current context's server, CA and client certificate (files, as the
        emulator's and :class:`~arcflow.devstack.control_plane.ControlPlane`'s are)."""
        document = yaml.safe_load(Path(path).read_text())
        context = next(
            c["context"] for c in document["contexts"] if c["name"] == document["current-context"]
        )
        cluster = next(
            c["cluster"] for c in document["clusters"] if c["name"] == context["cluster"]
        )
        user: dict[str, Any] = next(
            (u["user"] for u in document.get("users") or [] if u["name"] == context.get("user")), {}
        )
        return cls(
            server=str(cluster["server"]).rstrip("/"),
            ca_file=cluster.get("certificate-authority"),
            cert_file=(user or {}).get("client-certificate"),
            key_file=(user or {}).get("client-key"),
        )

    def ssl_context(self, *, with_client_cert: bool) -> ssl.SSLContext | None:
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if with_client_cert and self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


@dataclass
class ApiProxy:
    """``await ApiProxy(upstream, clients).start()``; :meth:`kubeconfig` writes the one a
    client uses; :attr:`counts` is ``client -> (verb, resource) -> requests``."""

    upstream: Upstream
    clients: Iterable[str]
    counts: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    #: Watches resuming from a resourceVersion below this get ``410 Expired``.
    expired_below: int = 0
    _by_port: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _runner: web.AppRunner | None = field(default=None, init=False, repr=False)
    _sessions: dict[bool, aiohttp.ClientSession] = field(
        default_factory=dict, init=False, repr=False
    )
    _watches: dict[int, web.Request] = field(default_factory=dict, init=False, repr=False)
    #: (client, resource) of each open watch, by the same key as ``_watches``.
    _watch_of: dict[int, tuple[str, str]] = field(default_factory=dict, init=False, repr=False)

    async def start(self) -> ApiProxy:
        for with_cert in (True, False):
            self._sessions[with_cert] = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
                connector=aiohttp.TCPConnector(
                    limit=0, ssl=self.upstream.ssl_context(with_client_cert=with_cert) or False
                ),
                auto_decompress=False,
            )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        # Open watches hold their handlers: do not wait the default 60 s for them at exit.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        for client in dict.fromkeys(self.clients):
            port = free_port()
            await web.TCPSite(self._runner, "127.0.0.1", port).start()
            self.ports[client] = port
            self._by_port[port] = client
            self.counts[client] = Counter()
        return self

    async def stop(self) -> None:
        for session in self._sessions.values():
            await session.close()  # ends the upstream reads of open watches first
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, client: str) -> str:
        return f"http://127.0.0.1:{self.ports[client]}"

    def kubeconfig(self, client: str, path: Path) -> Path:
        """A kubeconfig for ``client``: plain HTTP to its port, no credentials (the proxy
        adds the admin certificate upstream)."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url(client)}}],
            "users": [{"name": client, "user": {}}],
            "contexts": [{"name": client, "context": {"cluster": "proxy", "user": client}}],
            "current-context": client,
        }
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path

    # --- counts and faults ------------------------------------------------------------------

    def reset(self) -> None:
        for counter in self.counts.values():
            counter.clear()

    def totals(self) -> dict[str, dict[str, int]]:
        """``client -> "verb resource" -> requests`` (sorted, for a report)."""
        return {
            client: {f"{verb} {res}": n for (verb, res), n in sorted(counter.items())}
            for client, counter in self.counts.items()
        }

    def inject(
        self,
        *,
        verb: str,
        resource: str,
        status: int,
        reason: str,
        message: str = "",
        times: int = 1,
    ) -> Fault:
        fault = Fault(
            verb, resource, status, reason, message or f"{verb} {resource} refused", times
        )
        self.faults.append(fault)
        return fault

    def open_watches(self) -> dict[str, dict[str, int]]:
        """``client -> resource -> watches open now`` through this proxy."""
        out: dict[str, Counter[str]] = {}
        for client, resource in self._watch_of.values():
            out.setdefault(client, Counter())[resource] += 1
        return {client: dict(sorted(c.items())) for client, c in sorted(out.items())}

    def drop_watches(self) -> int:
        """Cut every open watch (the connection closes mid-stream); returns how many."""
        dropped = 0
        for request in list(self._watches.values()):
            transport = request.transport
            if transport is not None and not transport.is_closing():
                transport.abort()
                dropped += 1
        self._watches.clear()
        return dropped

    def expire_before(self, resource_version: int) -> None:
        """From now on a watch resuming from a resourceVersion below this one gets the
        ``410 Expired`` ERROR event (history compacted), as a real server answers then."""
        self.expired_below = max(self.expired_below, resource_version)

    # --- forwarding ----------------------------------------------------------------------

    def _client_of(self, request: web.Request) -> str:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        port = int(sockname[1]) if sockname else 0
        return self._by_port.get(port, "?")

    def _expired(self, verb: str, query: str) -> str | None:
        if verb != "watch" or not self.expired_below:
            return None
        values = parse_qs(query).get("resourceVersion") or [""]
        with contextlib.suppress(ValueError):
            if 0 < int(values[0]) < self.expired_below:
                return values[0]
        return None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        verb, resource = classify(request.method, request.path, request.query_string)
        client = self._client_of(request)
        if client == "kubelet" and "Authorization" in request.headers:
            # A listener's kubeconfig is the kubelet's with its pod's token (pod runner).
            client = "listener"
        self.counts.setdefault(client, Counter())[(verb, resource)] += 1
        for fault in self.faults:
            if fault.matches(verb, resource):
                fault.hits += 1
                return web.Response(
                    status=fault.status, body=fault.body(), content_type="application/json"
                )
        old = self._expired(verb, request.query_string)
        if old is not None:
            return await self._expired_watch(request, old)
        body = await request.read()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "transfer-encoding")
        }
        session = self._sessions["Authorization" not in request.headers]
        url = f"{self.upstream.server}{request.path_qs}"
        watching = verb == "watch"
        if watching:
            self._watches[id(request)] = request
            self._watch_of[id(request)] = (client, resource)
        try:
            async with session.request(
                request.method, url, data=body or None, headers=headers
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for key in ("Content-Type", "Content-Encoding", "Audit-Id"):
                    if key in upstream.headers:
                        response.headers[key] = upstream.headers[key]
                await response.prepare(request)
                with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)  # flushed at once: watches stream
                with contextlib.suppress(ConnectionResetError):
                    await response.write_eof()
                return response
        except aiohttp.ClientError as exc:  # the server is down (restarting): what a client sees
            log.debug("upstream %s %s failed: %s", verb, resource, type(exc).__name__)
            return web.Response(
                status=503,
                body=Fault(verb, resource, 503, "ServiceUnavailable", str(exc), 1).body(),
                content_type="application/json",
            )
        finally:
            self._watches.pop(id(request), None)
            self._watch_of.pop(id(request), None)

    async def _expired_watch(self, request: web.Request, old: str) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        response.headers["Content-Type"] = "application/json"
        await response.prepare(request)
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {old} ({self.expired_below})",
            "reason": "Expired",
            "code": 410,
        }
        await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
        await response.write_eof()
        return response


__all__ = ["ApiProxy", "Fault", "Upstream", "classify"]
