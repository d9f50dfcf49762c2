"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

Started by the test session (one per session, a namespace per test), the benchmarks and
``arcflow dev --kube apiserver``. The binaries come from :func:`locate_binaries`:
``KUBEBUILDER_ASSETS`` (envtest's convention), ``ARCFLOW_CONTROL_PLANE_DIR``, or
``scripts/control-plane.sh`` of the checkout, which builds them from the Go module proxy
(docs/control-plane.md).

What it sets up, in order (each step waits for the previous one's readiness, with a deadline):

1. credentials in a private folder: a CA, a serving certificate for 127.0.0.1, an admin client
   certificate in ``system:masters``, an RSA key pair that signs ServiceAccount tokens;
2. etcd (``--unsafe-no-fsync``: a test cluster's durability is the folder's lifetime);
3. kube-apiserver with RBAC authorization, the ServiceAccount issuer, and an audit log at
   Metadata level when asked (it names the user of every request: the benchmarks count API
   calls per identity from it);
4. the CRDs of ``deploy/crds`` (or any given), waited for until Established, *before* the
   controller manager starts: its garbage collector discovers resource types at start and then
   only about every 30 s;
5. kube-controller-manager (garbage collector, namespace deletion, ServiceAccount and root CA
   publishing, ...), ready once the ``default`` ServiceAccount of ``default`` exists.

There is no scheduler and no kubelet: :mod:`arcflow.devstack.pod_runner` plays the kubelet.
:class:`arcflow.devstack.node.Node` runs this control plane inside a network namespace of its own
(``network``, ``advertise_address``) next to a real scheduler, kubelet and container runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from arcflow.devstack.nats_server import free_port

ASSETS_ENV = "KUBEBUILDER_ASSETS"
DIR_ENV = "ARCFLOW_CONTROL_PLANE_DIR"
BUILD_SCRIPT = Path("scripts") / "control-plane.sh"
CRDS_DIR = Path("deploy") / "crds"
#: The audit policy the benchmarks read: every request at Metadata level (user, verb,
#: resource, response code), one line per request when it completes.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata"}],
}


#: Seconds to wait after SIGTERM before SIGKILL. kube-apiserver stops listening at once but then
#: drains open watches for up to 30 s: nothing of a test cluster is worth that wait, and a hard
#: stop is a fault a controller must ride out anyway.
_GRACE = {"kube-apiserver": 2.0}


#: The Services' ClusterIP range.
SERVICE_CIDR = "10.0.0.0/24"


class ControlPlaneError(RuntimeError):
    """The binaries are missing or a part of the control plane did not come up."""


def repo_root(start: Path | None = None) -> Path | None:
    """The checkout holding this package (the folder with ``scripts/control-plane.sh``)."""
    here = (start or Path(__file__)).resolve()
    for parent in [here, *here.parents]:
        if (parent / BUILD_SCRIPT).is_file() and (parent / CRDS_DIR).is_dir():
            return parent
    return None


@dataclass(frozen=True)
class Binaries:
    folder: Path

    @property
    def kube_apiserver(self) -> Path:
        return self.folder / "kube-apiserver"

    @property
    def kube_controller_manager(self) -> Path | None:
        path = self.folder / "kube-controller-manager"
        return path if os.access(path, os.X_OK) else None

    @property
    def etcd(self) -> Path:
        return self.folder / "etcd"


def _usable(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in ("kube-apiserver", "etcd"))


def locate_binaries(*, build: bool = True) -> Binaries:
    """``KUBEBUILDER_ASSETS``, then ``ARCFLOW_CONTROL_PLANE_DIR``, then the checkout's build
    script (which returns at once when its cache holds the pinned release, and builds it
    otherwise when ``build``). Raises :class:`ControlPlaneError` saying how to get them."""
    for env in (ASSETS_ENV, DIR_ENV):
        value = os.environ.get(env)
        if value:
            if not _usable(Path(value)):
                raise ControlPlaneError(
                    f"{env}={value} holds no executable kube-apiserver and etcd"
                )
            return Binaries(Path(value))
    root = repo_root()
    if root is None:
        raise ControlPlaneError(
            f"no control plane: set {ASSETS_ENV} to a folder with kube-apiserver, etcd and "
            "kube-controller-manager (setup-envtest), or run from a checkout with Go 1.26"
        )
    child_env = dict(os.environ)
    if not build:
        child_env["ARCFLOW_CONTROL_PLANE_NO_BUILD"] = "1"
    done = subprocess.run(
        ["bash", str(root / BUILD_SCRIPT)],
        capture_output=True,
        text=True,
        env=child_env,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not _usable(Path(lines[-1])):
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed: {reason}")
    return Binaries(Path(lines[-1]))


# --- credentials ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pair:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _issue(
    common_name: str,
    ca: _Pair | None,
    *,
    organization: str | None = None,
    server: bool = False,
    addresses: Sequence[str] = (),
    names: Sequence[str] = (),
) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject if ca else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    if ca is not None:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(name) for name in ("localhost", *names)),
                    *(x509.IPAddress(IPv4Address(a)) for a in ("127.0.0.1", *addresses)),
                ]
            ),
            critical=False,
        )
    cert = builder.sign(ca.key if ca else key, hashes.SHA256())
    return _Pair(key, cert)


@dataclass(frozen=True)
class Credentials:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.folder / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.folder / "admin.key"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def sa_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.folder / "sa.pub"

    @classmethod
    def create(
        cls, folder: Path, *, addresses: Sequence[str] = (), names: Sequence[str] = ()
    ) -> Credentials:
        """The CA, the API server's serving certificate (for 127.0.0.1 and localhost, plus
        ``addresses`` and ``names``), the admin's client certificate and the ServiceAccount
        key pair."""
        folder.mkdir(parents=True, exist_ok=True)
        ca = _issue("arcflow-test-ca", None)
        serving = _issue("kube-apiserver", ca, server=True, addresses=addresses, names=names)
        admin = _issue("arcflow-admin", ca, organization="system:masters")
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        creds = cls(folder)
        writes = {
            creds.ca: ca.cert_pem(),
            creds.ca_key: ca.key_pem(),
            creds.serving_cert: serving.cert_pem(),
            creds.serving_key: serving.key_pem(),
            creds.admin_cert: admin.cert_pem(),
            creds.admin_key: admin.key_pem(),
            creds.sa_key: sa.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ),
            creds.sa_pub: sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        }
        for path, data in writes.items():
            path.write_bytes(data)
            path.chmod(0o600)
        return creds

    def issue_client(self, stem: str, common_name: str, organization: str | None = None) -> Path:
        """A client certificate ``<stem>.crt`` (and key ``<stem>.key``) signed by the CA, for
        the identity ``common_name`` in group ``organization``; returns the certificate."""
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca = _Pair(ca_key, x509.load_pem_x509_certificate(self.ca.read_bytes()))
        pair = _issue(common_name, ca, organization=organization)
        cert, key = self.folder / f"{stem}.crt", self.folder / f"{stem}.key"
        for path, data in ((cert, pair.cert_pem()), (key, pair.key_pem())):
            path.write_bytes(data)
            path.chmod(0o600)
        return cert


# --- processes -------------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.popen = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
                self.popen.wait(5)
        self.popen = None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_until(
    what: str,
    ready: Callable[[], object],
    *,
    within: float,
    process: Process | None = None,
    error: type[RuntimeError] = ControlPlaneError,
    interval: float = 0.1,
    tail: int = 20,
) -> None:
    """Poll ``ready`` (an exception counts as not yet) until it is true, for ``within`` seconds;
    fail at once when ``process`` exits. The error names ``what`` and shows the log's tail."""
    deadline = time.monotonic() + within
    while True:
        if process is not None and not process.alive:
            raise error(f"{process.name} exited while waiting for {what}:\n{process.tail(tail)}")
        with contextlib.suppress(Exception):
            if ready():
                return
        if time.monotonic() > deadline:
            prefix, logs = (f"{process.name}: ", process.tail(tail)) if process else ("", "")
            raise error(f"{prefix}no {what} within {within:.0f} s:\n{logs}")
        time.sleep(interval)


class Network(Protocol):
    """Where the control plane's processes run when not on the host's loopback: a network
    namespace (:class:`arcflow.devstack.node.netns.NetworkNamespace`). ``command`` wraps a
    command line to run inside it; ``expose`` (idempotent) makes its 127.0.0.1:port answer on
    the host's 127.0.0.1:port, so the admin requests and readiness checks stay as they are."""

    def command(self, args: Sequence[str]) -> list[str]: ...

    def expose(self, port: int) -> None: ...


@dataclass
class ControlPlane:
    """``with ControlPlane() as cp: cp.kubeconfig`` (the admin's; ``system:masters``).

    ``start`` is synchronous (subprocesses and short HTTP polls): async callers run it in a
    thread, as the dev stack does with nats-server.
    """

    binaries: Binaries | None = None
    crds: Sequence[Path] | None = None
    audit: bool = False
    startup_timeout: float = 120.0
    #: Extra ``--flag=value`` arguments per component ("etcd", "kube-apiserver",
    #: "kube-controller-manager").
    extra_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    folder: Path | None = None
    keep_folder: bool = False
    etcd_port: int = 0
    port: int = 0
    #: Run every process inside this network (None: the host's loopback).
    network: Network | None = None
    #: The address the API server advertises (the ``kubernetes`` Service's endpoint). Another
    #: than 127.0.0.1 binds the API server to every address of its network and turns the
    #: endpoint reconciler on.
    advertise_address: str = "127.0.0.1"
    #: Extra IP addresses and DNS names in the serving certificate.
    serving_addresses: Sequence[str] = ()
    serving_names: Sequence[str] = ()
    #: ``--authorization-mode`` (a real node adds ``Node`` for its kubelet's identity).
    authorization_modes: Sequence[str] = ("RBAC",)
    _owns_folder: bool = field(default=False, init=False, repr=False)
    _processes: dict[str, Process] = field(default_factory=dict, init=False, repr=False)
    _credentials: Credentials | None = field(default=None, init=False, repr=False)
    version: str = field(default="", init=False)

    # --- addresses and files ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def credentials(self) -> Credentials:
        if self._credentials is None:
            raise ControlPlaneError("the control plane is not started")
        return self._credentials

    @property
    def kubeconfig(self) -> Path:
        assert self.folder is not None
        return self.folder / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        assert self.folder is not None
        return self.folder / "audit.log"

    def log_of(self, component: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{component}.log"

    def kubeconfig_dict(
        self, *, token: str | None = None, user: str = "admin", namespace: str = "default"
    ) -> dict[str, Any]:
        """A kubeconfig for the admin (client certificate) or for a bearer ``token``."""
        creds = self.credentials
        auth: dict[str, str]
        if token is not None:
            auth = {"token": token}
        else:
            auth = {
                "client-certificate": str(creds.admin_cert),
                "client-key": str(creds.admin_key),
            }
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "arcflow",
                    "cluster": {"server": self.url, "certificate-authority": str(creds.ca)},
                }
            ],
            "users": [{"name": user, "user": auth}],
            "contexts": [
                {
                    "name": user,
                    "context": {"cluster": "arcflow", "user": user, "namespace": namespace},
                }
            ],
            "current-context": user,
        }

    def write_kubeconfig(
        self,
        path: Path,
        *,
        token: str | None = None,
        user: str = "admin",
        namespace: str = "default",
    ) -> Path:
        path.write_text(
            yaml.safe_dump(self.kubeconfig_dict(token=token, user=user, namespace=namespace))
        )
        path.chmod(0o600)
        return path

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return bool(self._processes) and all(p.alive for p in self._processes.values())

    def start(self) -> ControlPlane:
        binaries = self.binaries or locate_binaries()
        self.binaries = binaries
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="arcflow-kube-"))
            self._owns_folder = True
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._credentials = Credentials.create(
                self.folder / "pki", addresses=self.serving_addresses, names=self.serving_names
            )
            self._start_etcd(binaries)
            self._start_apiserver(binaries)
            self.write_kubeconfig(self.kubeconfig)
            self.version = str(self.request("GET", "/version").get("gitVersion", ""))
            self.install_crds(self.crds if self.crds is not None else default_crds())
            if binaries.kube_controller_manager is not None:
                self._start_controller_manager(binaries.kube_controller_manager)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in reversed(list(self._processes)):
            self._processes[name].stop(_GRACE.get(name, 10.0))
        self._processes.clear()
        if self._owns_folder and not self.keep_folder and self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd (a fault a
        controller must ride out: its watches drop, its requests are refused meanwhile)."""
        assert self.binaries is not None
        self._processes["kube-apiserver"].stop(_GRACE["kube-apiserver"])
        self._start_apiserver(self.binaries)

    def _spawn(self, name: str, args: list[str]) -> Process:
        extra = list(self.extra_args.get(name, ()))
        command = [*args, *extra]
        if self.network is not None:
            command = self.network.command(command)
        process = Process(name, command, self.log_of(name))
        process.start()
        self._processes[name] = process
        return process

    def _wait(self, process: Process, what: str, ready: Callable[[], object]) -> None:
        wait_until(what, ready, within=self.startup_timeout, process=process)

    def _start_etcd(self, binaries: Binaries) -> None:
        assert self.folder is not None
        self.etcd_port = self.etcd_port or free_port()
        peer = free_port()
        if self.network is not None:
            self.network.expose(self.etcd_port)
        client_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{peer}"
        process = self._spawn(
            "etcd",
            [
                str(binaries.etcd),
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client_url}/health", timeout=1) as response:  # noqa: S310
                return bool(json.load(response).get("health") == "true")

        self._wait(process, "a healthy etcd", healthy)

    def _start_apiserver(self, binaries: Binaries) -> None:
        assert self.folder is not None
        creds = self.credentials
        self.port = self.port or free_port()
        if self.network is not None:
            self.network.expose(self.port)
        loopback = self.advertise_address == "127.0.0.1"
        args = [
            str(binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--bind-address={'127.0.0.1' if loopback else '0.0.0.0'}",
            f"--advertise-address={self.advertise_address}",
            f"--secure-port={self.port}",
            f"--cert-dir={self.folder / 'apiserver-certs'}",
            f"--tls-cert-file={creds.serving_cert}",
            f"--tls-private-key-file={creds.serving_key}",
            f"--client-ca-file={creds.ca}",
            f"--service-account-issuer=https://127.0.0.1:{self.port}",
            f"--service-account-key-file={creds.sa_pub}",
            f"--service-account-signing-key-file={creds.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--authorization-mode={','.join(self.authorization_modes)}",
            "--allow-privileged=true",
            "--v=1",
        ]
        if loopback:
            # Without it the server logs an error every 10 s about endpoints on loopback.
            args.append("--endpoint-reconciler-type=none")
        if self.audit:
            policy = self.folder / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(AUDIT_POLICY))
            args += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
            ]
        process = self._spawn("kube-apiserver", args)
        self._wait(process, "/readyz", lambda: self.get_text("/readyz") == "ok")

    def _start_controller_manager(self, binary: Path) -> None:
        creds = self.credentials
        process = self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                f"--service-account-private-key-file={creds.sa_key}",
                f"--root-ca-file={creds.ca}",
                "--use-service-account-credentials=false",
                "--v=1",
            ],
        )
        # The ServiceAccount controller is up once the default namespace has its account.
        self._wait(
            process,
            "the default ServiceAccount (ServiceAccount controller)",
            lambda: self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default"),
        )

    # --- admin requests (the fixture's own, not the code under test's) --------------------

    def _ssl_context(self) -> ssl.SSLContext:
        creds = self.credentials
        context = ssl.create_default_context(cafile=str(creds.ca))
        context.load_cert_chain(str(creds.admin_cert), str(creds.admin_key))
        return context

    def get_text(self, path: str, *, timeout: float = 2.0) -> str:
        """A GET as the admin, the body as text (``/readyz``, a pod's ``/log``)."""
        return self.get_bytes(path, timeout=timeout).decode()

    def get_bytes(self, path: str, *, timeout: float = 2.0) -> bytes:
        """A GET as the admin, the body as it came (a ``/debug/pprof`` profile)."""
        url = f"{self.url}{path}"
        context = self._ssl_context()
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:  # noqa: S310
            return bytes(response.read())

    def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> dict[str, Any]:
        """One request as the admin; an HTTP error raises ``urllib.error.HTTPError``."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)  # noqa: S310
        if data is not None:
            request.add_header("Content-Type", content_type)
        context = self._ssl_context()
        with urllib.request.urlopen(request, timeout=10, context=context) as response:  # noqa: S310
            raw = response.read()
        return dict(json.loads(raw)) if raw else {}

    def install_crds(self, paths: Sequence[Path]) -> None:
        """Create (or replace) each CRD and wait until every one is Established."""
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names: list[str] = []
        for path in paths:
            for document in yaml.safe_load_all(path.read_text()):
                if not document:
                    continue
                name = document["metadata"]["name"]
                names.append(name)
                try:
                    self.request("POST", base, document)
                except urllib.error.HTTPError as exc:
                    if exc.code != 409:
                        raise ControlPlaneError(
                            f"CRD {name} refused: {exc.code} {exc.read().decode()[:500]}"
                        ) from None
                    current = self.request("GET", f"{base}/{name}")
                    document["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    self.request("PUT", f"{base}/{name}", document)
        deadline = time.monotonic() + self.startup_timeout
        for name in names:
            while not _established(self.request("GET", f"{base}/{name}")):
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not Established in time")
                time.sleep(0.05)

    def create_token(self, namespace: str, service_account: str, *, seconds: int = 3600) -> str:
        """A token of ``namespace/service_account`` from the TokenRequest API (what ``kubectl
        create token`` asks for)."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        return str(self.request("POST", path, body)["status"]["token"])

    def logs(self) -> Iterator[tuple[str, str]]:
        for name, process in self._processes.items():
            yield name, process.tail()


def _established(crd: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def default_crds() -> list[Path]:
    root = repo_root()
    if root is None:
        raise ControlPlaneError("cannot find deploy/crds: pass crds=[...]")
    return sorted((root / CRDS_DIR).glob("*.yaml"))


__all__ = [
    "ASSETS_ENV",
    "AUDIT_POLICY",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "Credentials",
    "Network",
    "default_crds",
    "locate_binaries",
    "repo_root",
]
