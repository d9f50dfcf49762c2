"""How an Actions client reaches one GitHub server: a private CA and an HTTP(S) proxy.

An AutoscalingRunnerSet may name a CA (``githubServerTLS``: a ConfigMap key) and a proxy
(``proxy``: ``http``/``https`` URLs with optional credential Secrets, and ``noProxy``). Every
client arcflow runs for that set uses them, as upstream's controllers do
(docs/upstream-behaviour.md#actions-connection): the registrar's, and the listener's (which
reads the CA from its config and the proxy from its environment). This module only holds the
resolved values and turns them into httpx transports; reading the ConfigMap and Secrets is the
caller's job.
"""

from __future__ import annotations

import hashlib
import ipaddress
import ssl
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import httpx


@dataclass(frozen=True, slots=True)
class ServerConnection:
    """The resolved CA bundle and proxy of one GitHub server. Proxy URLs may carry
    credentials (``scheme://user:password@host:port``), so they never appear in a repr."""

    root_ca_pem: str = ""
    http_proxy: str = field(default="", repr=False)
    https_proxy: str = field(default="", repr=False)
    no_proxy: tuple[str, ...] = ()

    @property
    def has_proxy(self) -> bool:
        return bool(self.http_proxy or self.https_proxy)

    def fingerprint(self) -> str:
        """SHA-256 over every field: a cache key that holds no credential."""
        digest = hashlib.sha256()
        for part in (self.root_ca_pem, self.http_proxy, self.https_proxy, *self.no_proxy):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def proxy_passwords(self) -> list[str]:
        """The proxy passwords (as written and decoded), to scrub from error texts."""
        found: list[str] = []
        for url in (self.http_proxy, self.https_proxy):
            password = urlsplit(url).password if url else None
            if password:
                found.extend({password, unquote(password)})
        return found

    def proxy_mounts(
        self, verify: ssl.SSLContext | bool
    ) -> dict[str, httpx.AsyncBaseTransport | None]:
        """httpx mounts: ``http://`` and ``https://`` requests through their proxy, hosts of
        ``no_proxy`` direct (``None`` means the client's own transport)."""
        if "*" in self.no_proxy:
            return {}
        mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
        for scheme, url in (("http://", self.http_proxy), ("https://", self.https_proxy)):
            if url:
                mounts[scheme] = httpx.AsyncHTTPTransport(proxy=url, verify=verify)
        if mounts:
            for entry in self.no_proxy:
                pattern = no_proxy_pattern(entry)
                if pattern:
                    mounts[pattern] = None
        return mounts


def no_proxy_pattern(entry: str) -> str:
    """An httpx mount pattern for one ``noProxy`` entry (pure): an IP or ``localhost`` matches
    exactly, a domain matches itself and its subdomains (a leading dot too), ``host:port``
    matches that port only. CIDR ranges are not expressible as a pattern and are ignored."""
    entry = entry.strip().lower()
    if not entry or "/" in entry:
        return ""
    host, port = entry, ""
    if entry.startswith("["):  # [v6] or [v6]:port
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    suffix = f":{port}" if port.isdigit() else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        shown = f"[{address}]" if address.version == 6 else str(address)
        return f"all://{shown}{suffix}"
    if host == "localhost":
        return f"all://localhost{suffix}"
    return f"all://*{host.lstrip('.')}{suffix}"
