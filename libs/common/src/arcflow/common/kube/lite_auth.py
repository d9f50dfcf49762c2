"""Where the API server is and how to authenticate to it, without kubernetes_asyncio.

Every process's :class:`~arcflow.common.kube.client.KubeClient` connects through an
:class:`ApiConnection` from here (docs/kubernetes.md, "Connection and auth"). Two sources, as
``kubectl`` and client-go know them:

- **in-cluster**: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, the service
  account token and CA at ``/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}``.
  The token is a projected token the kubelet rotates, so it is re-read once a minute;
- **a kubeconfig** (the dev stack, a laptop): the context's cluster ``server``,
  ``certificate-authority``/``-data``, ``insecure-skip-tls-verify``, and the user's ``token``,
  ``tokenFile``, ``client-certificate``/``-data`` + ``client-key``/``-data`` or
  ``username``/``password``; the cluster's ``tls-server-name`` and ``proxy-url``. A user with an
  exec plugin or an auth provider raises :class:`PluginAuthRequired`:
  :mod:`arcflow.common.kube.plugin_auth` loads such a kubeconfig with kubernetes_asyncio.

PyYAML is imported only when a kubeconfig is read. Nothing here logs or repeats a credential.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: client-go re-reads a projected service-account token about once a minute.
TOKEN_REFRESH_SECONDS = 60.0


class KubeConfigError(Exception):
    """The connection settings are missing or unusable (message names fields, never values)."""


class PluginAuthRequired(KubeConfigError):  # noqa: N818 - a condition, caught to fall back
    """The kubeconfig's user runs an exec plugin or an auth provider, which only
    :mod:`arcflow.common.kube.plugin_auth` (kubernetes_asyncio's loader) can load."""

    def __init__(self, message: str, *, path: Path, context: str | None, plugin: str) -> None:
        super().__init__(message)
        self.path = path
        self.context = context
        #: ``"exec"`` or ``"auth-provider:<name>"``.
        self.plugin = plugin


class FileToken:
    """A bearer token read from a file and re-read after ``refresh`` seconds."""

    def __init__(
        self,
        path: Path,
        *,
        refresh: float = TOKEN_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._refresh = refresh
        self._clock = clock
        self._value = ""
        self._read_at: float | None = None

    def __call__(self) -> str:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self._refresh:
            try:
                self._value = self.path.read_text().strip()
            except OSError as exc:
                if not self._value:
                    raise KubeConfigError(
                        f"cannot read the token file {self.path}: {exc.strerror}"
                    ) from None
            self._read_at = now
        return self._value

    def __repr__(self) -> str:
        return f"FileToken({str(self.path)!r})"


@dataclass
class ApiConnection:
    """Everything needed to talk to one API server. ``repr`` never shows a credential.

    ``refresh``, when set, is awaited before each request (it decides itself when there is
    something to renew: an exec plugin's expiring token); ``proxy`` is the kubeconfig's
    ``proxy-url``, ``tls_server_name`` the name the server's certificate is checked against
    when it is not the host of ``server``.
    """

    server: str
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    token: Callable[[], str] | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    refresh: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    proxy: str | None = field(default=None, repr=False)
    tls_server_name: str | None = None

    def auth_headers(self) -> dict[str, str]:
        if self.token is not None:
            value = self.token()
            if value:
                return {"Authorization": f"Bearer {value}"}
        if self.basic_auth is not None:
            raw = f"{self.basic_auth[0]}:{self.basic_auth[1]}".encode()
            return {"Authorization": f"Basic {base64.b64encode(raw).decode()}"}
        return {}


def _ssl_context(
    *,
    ca_file: str | None = None,
    ca_data: bytes | None = None,
    insecure: bool = False,
    cert: tuple[bytes, bytes] | None = None,
) -> ssl.SSLContext:
    context = (
        ssl.create_default_context(cafile=ca_file)
        if not ca_data
        else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    )
    if ca_data:
        context.load_verify_locations(cadata=ca_data.decode())
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        # ssl loads a certificate chain only from files: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="arcflow-kube-") as tmp:
            cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            for path, data in ((cert_path, cert[0]), (key_path, cert[1])):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            context.load_cert_chain(cert_path, key_path)
    return context


def in_cluster_connection(
    environ: Mapping[str, str] | None = None, directory: Path = SERVICE_ACCOUNT_DIR
) -> ApiConnection:
    """The pod's service account (what a listener pod without a kubeconfig uses)."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError(
            "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"
        )
    token_path, ca_path = directory / "token", directory / "ca.crt"
    for path in (token_path, ca_path):
        if not path.is_file():
            raise KubeConfigError(f"service account file {path} is missing")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6
    token = FileToken(token_path)
    token()  # fail now, not on the first request
    return ApiConnection(
        server=f"https://{host}:{port}",
        ssl_context=_ssl_context(ca_file=str(ca_path)),
        token=token,
    )


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            return body if isinstance(body, dict) else {}
    raise KubeConfigError(f"kubeconfig has no {what} named {name!r}")


def _data_or_file(
    section: Mapping[str, Any], key: str, base: Path
) -> tuple[bytes | None, str | None]:
    """``<key>-data`` (base64) or ``<key>`` (a path, relative to the kubeconfig's folder)."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True), None
        except ValueError:
            raise KubeConfigError(f"kubeconfig {key}-data is not valid base64") from None
    path = section.get(key)
    if path:
        return None, str((base / str(path)).resolve())
    return None, None


def _parse_kubeconfig(text: str, file: Path) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml  # only a YAML kubeconfig needs it

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise KubeConfigError(f"kubeconfig {file} is not valid YAML") from None


def kubeconfig_connection(
    path: str | Path | None = None, context: str | None = None
) -> ApiConnection:
    """A kubeconfig's context (default: ``$KUBECONFIG``'s first file or ``~/.kube/config``).

    A kubeconfig written as JSON (valid YAML, accepted by kubectl) is read without PyYAML.
    """
    if path is None:
        env_path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        path = env_path or Path.home() / ".kube" / "config"
    file = Path(path).expanduser()
    try:
        text = file.read_text()
    except OSError as exc:
        raise KubeConfigError(f"cannot read kubeconfig {file}: {exc.strerror}") from None
    document = _parse_kubeconfig(text, file)
    if not isinstance(document, dict):
        raise KubeConfigError(f"kubeconfig {file} is not a mapping")
    name = context or document.get("current-context")
    if not name:
        raise KubeConfigError(f"kubeconfig {file} has no current-context; name a context")
    ctx = _named(document.get("contexts"), str(name), "context")
    cluster = _named(document.get("clusters"), str(ctx.get("cluster", "")), "cluster")
    user = (
        _named(document.get("users"), str(ctx.get("user", "")), "user") if ctx.get("user") else {}
    )
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise KubeConfigError(f"cluster {ctx.get('cluster')!r} has no server")
    if user.get("exec") or user.get("auth-provider"):
        provider = user.get("auth-provider")
        plugin = (
            "exec"
            if user.get("exec")
            else f"auth-provider:{provider.get('name', '') if isinstance(provider, dict) else ''}"
        )
        raise PluginAuthRequired(
            "kubeconfig user uses an exec plugin or auth provider, which this module does not "
            "run (KubeClient.from_settings loads it with kubernetes_asyncio)",
            path=file,
            context=str(name),
            plugin=plugin,
        )
    base = file.parent
    connection = ApiConnection(server=server)
    if cluster.get("proxy-url"):
        connection.proxy = str(cluster["proxy-url"])
    if cluster.get("tls-server-name"):
        connection.tls_server_name = str(cluster["tls-server-name"])
    if server.startswith("https://"):
        ca_data, ca_file = _data_or_file(cluster, "certificate-authority", base)
        cert_data, cert_file = _data_or_file(user, "client-certificate", base)
        key_data, key_file = _data_or_file(user, "client-key", base)
        cert: tuple[bytes, bytes] | None = None
        try:
            if cert_file:
                cert_data = Path(cert_file).read_bytes()
            if key_file:
                key_data = Path(key_file).read_bytes()
        except OSError as exc:
            raise KubeConfigError(
                f"cannot read a client certificate file: {exc.strerror}"
            ) from None
        if cert_data and key_data:
            cert = (cert_data, key_data)
        elif cert_data or key_data:
            raise KubeConfigError("kubeconfig user has a client certificate or key, not both")
        try:
            connection.ssl_context = _ssl_context(
                ca_file=ca_file,
                ca_data=ca_data,
                insecure=bool(cluster.get("insecure-skip-tls-verify")),
                cert=cert,
            )
        except (ssl.SSLError, OSError) as exc:
            raise KubeConfigError(
                f"kubeconfig TLS settings are unusable: {type(exc).__name__}"
            ) from None
    if user.get("token"):
        value = str(user["token"])
        connection.token = lambda: value
    elif user.get("tokenFile"):
        connection.token = FileToken((base / str(user["tokenFile"])).resolve())
    elif user.get("username") and user.get("password"):
        connection.basic_auth = (str(user["username"]), str(user["password"]))
    return connection
