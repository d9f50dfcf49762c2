"""The light Kubernetes client over HTTP: a real kube-apiserver (through the fault proxy, which
records paths and content types; and straight over TLS with a ServiceAccount token and its
RBAC), and a TLS server standing in for an API server's front door (service-account token and
CA, kubeconfig client certificates, the headers a real API server requires)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from arcflow.common.kube import ForbiddenError, KubeClient, KubeSettings, NotFoundError
from arcflow.common.kube.lite import LiteKubeSettings
from arcflow.common.kube.lite_auth import (
    FileToken,
    KubeConfigError,
    PluginAuthRequired,
    in_cluster_connection,
    kubeconfig_connection,
)
from arcflow.common.kube.plugin_auth import plugin_connection
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.polling import eventually

pytestmark = pytest.mark.integration

ERS = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunnerSet",
    "metadata": {"name": "arc-cpu"},
    "spec": {"replicas": 2, "patchID": 0},
}
RUNNER = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunner",
    "metadata": {"name": "arc-cpu-x1"},
    "spec": {  # what the CRD requires
        "githubConfigUrl": "https://github.com/example-org",
        "githubConfigSecret": "arc-cpu",
        "runnerScaleSetId": 1,
    },
}


@pytest.fixture
def session_plane(request: pytest.FixtureRequest) -> ControlPlane:
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("needs the session's own real kube-apiserver")
    plane: ControlPlane = request.getfixturevalue("control_plane")
    return plane


async def _merge_patches(kubeconfig: Path, kube_client: KubeClient, namespace: str) -> None:
    async with KubeClient(kubeconfig_connection(kubeconfig)) as lite:
        patched = await lite.patch_merge(
            "EphemeralRunnerSet",
            "arc-cpu",
            {"spec": {"patchID": 3, "replicas": None}},
            namespace=namespace,
        )
        assert patched["spec"]["patchID"] == 3
        assert "replicas" not in patched["spec"]  # null deletes the key (merge patch)
        await lite.patch_status(
            "EphemeralRunner", "arc-cpu-x1", {"jobId": "j1"}, namespace=namespace
        )
        with pytest.raises(NotFoundError):
            await lite.patch_merge("EphemeralRunnerSet", "gone", {}, namespace=namespace)
    stored = await kube_client.get("EphemeralRunner", "arc-cpu-x1", namespace)
    assert stored["status"]["jobId"] == "j1"


async def test_merge_patches_against_a_real_server(
    session_plane: ControlPlane, kube_client: KubeClient, kube_namespace: str, tmp_path: Path
) -> None:
    """Through the fault proxy, which records each request's path and content type."""
    await kube_client.create(ERS, namespace=kube_namespace)
    await kube_client.create(RUNNER, namespace=kube_namespace)
    async with KubeFaultProxy.for_control_plane(session_plane) as proxy:
        await _merge_patches(
            proxy.write_kubeconfig(tmp_path / "kubeconfig"), kube_client, kube_namespace
        )
    patches = [r for r in proxy.requests if r.method == "PATCH"]
    base = f"/apis/actions.github.com/v1alpha1/namespaces/{kube_namespace}"
    assert [(r.path, r.status) for r in patches] == [
        (f"{base}/ephemeralrunnersets/arc-cpu", 200),
        (f"{base}/ephemeralrunners/arc-cpu-x1/status", 200),
        (f"{base}/ephemeralrunnersets/gone", 404),
    ]
    assert {r.content_type for r in patches} == {"application/merge-patch+json"}


async def test_a_service_account_token_over_tls_with_its_rbac(
    session_plane: ControlPlane, kube_client: KubeClient, kube_namespace: str, tmp_path: Path
) -> None:
    """Straight to the real server as the listener runs: a ServiceAccount's bearer token, the
    server's CA from the kubeconfig, and only what its Role grants."""
    await kube_client.create(ERS, namespace=kube_namespace)
    await kube_client.create(RUNNER, namespace=kube_namespace)
    rbac = "rbac.authorization.k8s.io/v1"
    await kube_client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "listener"}},
        namespace=kube_namespace,
    )
    await kube_client.create(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "listener"},
            "rules": [
                {
                    "apiGroups": ["actions.github.com"],
                    "resources": ["ephemeralrunnersets"],
                    "verbs": ["patch"],
                }
            ],
        },
        namespace=kube_namespace,
    )
    await kube_client.create(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "listener"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "listener",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "listener", "namespace": kube_namespace}
            ],
        },
        namespace=kube_namespace,
    )
    token = await asyncio.to_thread(session_plane.create_token, kube_namespace, "listener")
    kubeconfig = session_plane.write_kubeconfig(tmp_path / "listener.kubeconfig", token=token)
    connection = kubeconfig_connection(kubeconfig)
    assert connection.server.startswith("https://")
    assert token not in repr(connection)
    patch = {"spec": {"patchID": 5}}
    async with KubeClient(connection) as lite:

        async def patched() -> bool:
            try:
                await lite.patch_merge(
                    "EphemeralRunnerSet", "arc-cpu", patch, namespace=kube_namespace
                )
            except ForbiddenError:
                return False  # the RoleBinding is not in the authorizer's cache yet
            return True

        await eventually(patched, what="the Role lets the token patch the ERS")
        with pytest.raises(ForbiddenError):  # the Role grants no status patch of runners
            await lite.patch_status(
                "EphemeralRunner", "arc-cpu-x1", {"jobId": "j1"}, namespace=kube_namespace
            )
    ers = await kube_client.get("EphemeralRunnerSet", "arc-cpu", kube_namespace)
    assert ers["spec"]["patchID"] == 5
    runner = await kube_client.get("EphemeralRunner", "arc-cpu-x1", kube_namespace)
    assert "jobId" not in (runner.get("status") or {})


# --- a TLS front door ---------------------------------------------------------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey]
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer[0]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )
    if subject == issuer[0]:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, False)
    return builder.sign(issuer[1], hashes.SHA256())


def _pem(obj: Any) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return bytes(
        obj.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


class FrontDoor:
    """A TLS server that answers like an API server and records what each request carried."""

    def __init__(self, tmp: Path) -> None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert("test-ca", ca_key, ("test-ca", ca_key))
        server_key = ec.generate_private_key(ec.SECP256R1())
        client_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_pem = _pem(ca)
        self.client_pem = (_pem(_cert("client", client_key, ("test-ca", ca_key))), _pem(client_key))
        (tmp / "server.crt").write_bytes(_pem(_cert("server", server_key, ("test-ca", ca_key))))
        (tmp / "server.key").write_bytes(_pem(server_key))
        (tmp / "ca.crt").write_bytes(self.ca_pem)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tmp / "ca.crt")
        self.context.load_cert_chain(tmp / "server.crt", tmp / "server.key")
        self.context.verify_mode = ssl.CERT_OPTIONAL
        self.seen: list[dict[str, Any]] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "headers": dict(request.headers),
                "client_cert": bool(peer),
                "body": await request.read(),
            }
        )
        if request.headers.get("Content-Type") != "application/merge-patch+json":
            return web.json_response({"kind": "Status", "code": 415}, status=415)
        return web.json_response({"metadata": {"name": "arc-cpu"}, "spec": {"patchID": 1}})


@pytest.fixture
async def front_door(tmp_path: Path) -> AsyncIterator[FrontDoor]:
    door = FrontDoor(tmp_path)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", door.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=door.context)
    await site.start()
    door.port = int(runner.addresses[0][1])
    try:
        yield door
    finally:
        await runner.cleanup()


async def test_in_cluster_service_account_token_and_ca(
    front_door: FrontDoor, tmp_path: Path
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token-1\n")
    (sa / "ca.crt").write_bytes(front_door.ca_pem)
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(front_door.port)}
    connection = in_cluster_connection(env, sa)
    assert connection.server == f"https://127.0.0.1:{front_door.port}"
    assert "sa-token" not in repr(connection)
    connection.token = FileToken(sa / "token", refresh=0.0)  # re-read at every request
    async with KubeClient(connection, user_agent="arcflow-listener") as lite:
        await lite.patch_merge("EphemeralRunnerSet", "arc-cpu", {"spec": {}}, namespace="ci")
        (sa / "token").write_text("sa-token-2")  # the kubelet rotated the projected token
        await lite.patch_merge("EphemeralRunnerSet", "arc-cpu", {"spec": {}}, namespace="ci")
    first, second = front_door.seen
    assert (
        first["path"]
        == "/apis/actions.github.com/v1alpha1/namespaces/ci/ephemeralrunnersets/arc-cpu"
    )
    assert first["method"] == "PATCH"
    assert first["headers"]["Authorization"] == "Bearer sa-token-1"
    assert second["headers"]["Authorization"] == "Bearer sa-token-2"
    assert first["headers"]["Content-Type"] == "application/merge-patch+json"
    assert first["headers"]["Accept"] == "application/json"
    assert first["headers"]["User-Agent"] == "arcflow-listener"
    assert json.loads(first["body"]) == {"spec": {}}


async def test_kubeconfig_client_certificate_and_ca_data(
    front_door: FrontDoor, tmp_path: Path
) -> None:
    cert, key = front_door.client_pem
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    config = {
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": f"https://127.0.0.1:{front_door.port}",
                    "certificate-authority-data": b64(front_door.ca_pem),
                },
            }
        ],
        "users": [
            {
                "name": "u",
                "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with KubeClient(kubeconfig_connection(path)) as lite:
        await lite.patch_status("EphemeralRunner", "r1", {"jobId": "1"}, namespace="ci")
    (seen,) = front_door.seen
    assert seen["client_cert"]
    assert seen["path"].endswith("/namespaces/ci/ephemeralrunners/r1/status")
    assert "Authorization" not in seen["headers"]


def test_kubeconfig_errors_name_the_problem_never_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://k:6443"}}],
                "users": [{"name": "u", "user": {"exec": {"command": "aws"}, "token": "s3cr3t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    with pytest.raises(KubeConfigError, match="exec plugin") as info:
        kubeconfig_connection(path)
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(KubeConfigError, match="has no context named 'y'"):
        kubeconfig_connection(path, "y")
    with pytest.raises(KubeConfigError, match="cannot read kubeconfig"):
        kubeconfig_connection(tmp_path / "missing")
    with pytest.raises(KubeConfigError, match="not in a cluster"):
        in_cluster_connection({}, tmp_path)


def test_light_settings_read_what_kube_settings_read(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LiteKubeSettings.from_env({}) == LiteKubeSettings(
        **KubeSettings().model_dump(include=set(LiteKubeSettings.__dataclass_fields__))
    )
    env = {
        "ARCFLOW_KUBE_KUBECONFIG": "/tmp/kc",
        "ARCFLOW_KUBE_CONTEXT": "dev",
        "ARCFLOW_KUBE_IN_CLUSTER": "true",
        "ARCFLOW_KUBE_QPS": "5.5",
        "ARCFLOW_KUBE_BURST": "7",
        "ARCFLOW_KUBE_REQUEST_TIMEOUT": "3",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    full = KubeSettings()
    assert LiteKubeSettings.from_env(env) == LiteKubeSettings(
        full.kubeconfig, full.context, full.in_cluster, full.qps, full.burst, full.request_timeout
    )
    for bad in (
        {"ARCFLOW_KUBE_QPS": "fast"},
        {"ARCFLOW_KUBE_BURST": "0"},
        {"ARCFLOW_KUBE_IN_CLUSTER": "maybe"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))) as info:
            LiteKubeSettings.from_env(bad)
        assert next(iter(bad.values())) not in str(info.value)


def test_the_client_and_its_light_settings_import_no_kubernetes_asyncio() -> None:
    code = (
        "import sys; import arcflow.common.kube.lite, arcflow.common.kube.client; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'kubernetes_asyncio', 'aiohttp', 'yaml', 'faststream', 'pydantic_settings'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --- exec plugins: kubernetes_asyncio loads the credential, the client sends it -------------

_EXEC_PLUGIN = """
import json, pathlib, sys
count = pathlib.Path(sys.argv[1])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
status = json.loads(pathlib.Path(sys.argv[2]).read_text())
if "token" in status:
    status["token"] = status["token"].replace("{n}", str(n))
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
    "status": status,
}))
"""


def _exec_kubeconfig(
    tmp_path: Path, server: str, cluster: dict[str, Any], status: dict[str, Any]
) -> Path:
    """A kubeconfig whose user runs a plugin printing ``status`` (``{n}`` in a token: how many
    times the plugin ran); the count is in ``tmp_path / "runs"``."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(_EXEC_PLUGIN)
    (tmp_path / "status.json").write_text(json.dumps(status))
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(plugin), str(tmp_path / "runs"), str(tmp_path / "status.json")],
        "interactiveMode": "Never",
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": {"exec": exec_user}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_an_exec_plugin_token_is_loaded_and_renewed(
    front_door: FrontDoor, tmp_path: Path
) -> None:
    """lite_auth refuses the exec user; KubeClient.from_settings has kubernetes_asyncio load it
    and sends the plugin's token over the same transport; the token is asked for again when the
    renewal is due (here at every request), never shown in a repr."""
    ca = base64.b64encode(front_door.ca_pem).decode()
    path = _exec_kubeconfig(
        tmp_path,
        f"https://127.0.0.1:{front_door.port}",
        {"certificate-authority-data": ca},
        {"token": "exec-token-{n}"},
    )
    with pytest.raises(PluginAuthRequired) as info:
        kubeconfig_connection(path)
    assert info.value.plugin == "exec"
    async with await KubeClient.from_settings(LiteKubeSettings(kubeconfig=str(path))) as kube:
        assert "exec-token" not in repr(kube) + repr(kube.connection)
        for _ in range(2):
            await kube.patch_merge("EphemeralRunnerSet", "arc-cpu", {}, namespace="ci")
    connection = await plugin_connection(info.value, refresh_every=0.0)
    async with KubeClient(connection) as kube:
        for _ in range(2):
            await kube.patch_merge("EphemeralRunnerSet", "arc-cpu", {}, namespace="ci")
    # Runs 1 and 2 load the two clients; the second client's renewal runs the plugin again
    # before each request (a plugin token without an expiry is always asked for again).
    assert [seen["headers"]["Authorization"] for seen in front_door.seen] == [
        "Bearer exec-token-1",
        "Bearer exec-token-1",
        "Bearer exec-token-3",
        "Bearer exec-token-4",
    ]


async def test_exec_plugins_against_a_real_server(
    session_plane: ControlPlane, kube_client: KubeClient, kube_namespace: str, tmp_path: Path
) -> None:
    """A plugin giving a client certificate (the admin's) and one giving a ServiceAccount's
    token, as the real server authenticates them."""
    creds = session_plane.credentials
    cluster = {"certificate-authority": str(creds.ca)}
    (tmp_path / "admin").mkdir()
    admin = _exec_kubeconfig(
        tmp_path / "admin",
        session_plane.url,
        cluster,
        {
            "clientCertificateData": Path(creds.admin_cert).read_text(),
            "clientKeyData": Path(creds.admin_key).read_text(),
        },
    )
    async with await KubeClient.from_settings(LiteKubeSettings(kubeconfig=str(admin))) as kube:
        created = await kube.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "via-exec"}},
            namespace=kube_namespace,
        )
        assert created["metadata"]["name"] == "via-exec"
    await kube_client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe"}},
        namespace=kube_namespace,
    )
    token = await asyncio.to_thread(session_plane.create_token, kube_namespace, "probe")
    (tmp_path / "sa").mkdir()
    probe = _exec_kubeconfig(tmp_path / "sa", session_plane.url, cluster, {"token": token})
    async with await KubeClient.from_settings(LiteKubeSettings(kubeconfig=str(probe))) as kube:
        with pytest.raises(ForbiddenError) as refused:  # authenticated as the SA, no Role
            await kube.get("ConfigMap", "via-exec", kube_namespace)
    assert f"system:serviceaccount:{kube_namespace}:probe" in str(refused.value)
    assert token not in str(refused.value)


async def test_a_failing_exec_plugin_is_a_config_error_without_its_output(tmp_path: Path) -> None:
    path = _exec_kubeconfig(tmp_path, "https://127.0.0.1:1", {}, {"token": "t"})
    (tmp_path / "plugin.py").write_text("import sys; sys.exit('s3cr3t in the plugin output')")
    with pytest.raises(KubeConfigError, match="exec user failed") as info:
        await KubeClient.from_settings(LiteKubeSettings(kubeconfig=str(path)))
    assert "s3cr3t" not in str(info.value)
