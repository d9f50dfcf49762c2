"""KubeClient over HTTP against a real kube-apiserver: settings, rate limiting, connection
errors, what its repr leaves out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arcflow.common.kube import (
    CONFIG_MAP,
    KubeClient,
    KubeConnectionError,
    KubeSettings,
    WatchStream,
)
from arcflow.devstack.nats_server import free_port

pytestmark = pytest.mark.integration


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_KUBE_KUBECONFIG", "/tmp/kc")
    monkeypatch.setenv("ARCFLOW_KUBE_QPS", "5")
    monkeypatch.setenv("ARCFLOW_KUBE_BURST", "7")
    monkeypatch.setenv("ARCFLOW_KUBE_IN_CLUSTER", "false")
    settings = KubeSettings()
    assert (settings.kubeconfig, settings.qps, settings.burst) == ("/tmp/kc", 5.0, 7)


async def test_rate_limiter_paces_requests(kube_kubeconfig: str) -> None:
    settings = KubeSettings(kubeconfig=kube_kubeconfig, qps=20, burst=2)
    async with await KubeClient.from_settings(settings) as client:
        started = time.monotonic()
        await asyncio.gather(*(client.list(CONFIG_MAP, namespace="default") for _ in range(6)))
        elapsed = time.monotonic() - started
    # 2 at once, then 4 more at 20/s: at least ~0.2 s.
    assert elapsed >= 0.18


def _with_server_and_token(kubeconfig: str, target: Path, server: str | None, token: str) -> Path:
    """A copy of ``kubeconfig`` whose users carry ``token`` (and, given, another server)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    if server is not None:
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = server
    target.write_text(yaml.safe_dump(config))
    return target


async def test_unreachable_server_is_a_typed_error(kube_kubeconfig: str, tmp_path: Path) -> None:
    closed = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    path = _with_server_and_token(kube_kubeconfig, tmp_path / "kubeconfig", closed, "x")
    async with await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(path), request_timeout=2)
    ) as client:
        with pytest.raises(KubeConnectionError):
            await client.get(CONFIG_MAP, "x", "default")


async def test_repr_hides_configuration(kube_kubeconfig: str, tmp_path: Path) -> None:
    secret = "s3cr3t-bearer-token-value"
    path = _with_server_and_token(kube_kubeconfig, tmp_path / "kubeconfig", None, secret)
    async with await KubeClient.from_settings(KubeSettings(kubeconfig=str(path))) as client:
        assert "token" not in repr(client).lower()
        assert secret not in repr(client)


async def test_create_needs_namespace_for_namespaced_kinds(kube_client: KubeClient) -> None:
    with pytest.raises(ValueError, match="namespaced"):
        await kube_client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        )


WATCHED = {"arcflow.test/watched": "1"}


async def test_a_closed_or_cancelled_watch_gives_its_connection_back(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """A watch read over httpx's streaming API: events arrive; a watch left while it streams
    (``async with`` ends it) or cancelled while it waits for the next event (as
    ``asyncio.timeout`` or a stopping service cancels it) closes its response. More watches are
    left than their pool has connections, so one that kept its connection would leave the
    watch opened after them waiting for the pool, not answered."""
    listed = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "watched", "labels": WATCHED},
        },
        namespace=kube_namespace,
    )

    def watch() -> WatchStream:
        return kube_client.watch(
            CONFIG_MAP,
            namespace=kube_namespace,
            label_selector=WATCHED,
            resource_version=listed.resource_version,
        )

    for _ in range(110):
        async with watch() as stream:
            event = await anext(stream)  # open, and streaming
            assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "watched")
            assert event.object["kind"] == "ConfigMap"
            assert stream.resource_version == event.resource_version
    for _ in range(20):
        stream = watch()
        assert (await anext(stream)).type == "ADDED"
        waiting = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.002)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(StopAsyncIteration):  # closed by the cancellation
            await anext(stream)
    async with asyncio.timeout(5):
        after = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
        async with watch() as stream:
            assert (await anext(stream)).type == "ADDED"
    assert "watched" in [item["metadata"]["name"] for item in after.items]


async def test_a_watch_ends_when_the_server_ends_it(
    kube_client: KubeClient, kube_namespace: str
) -> None:
    """``timeoutSeconds``: the server closes the stream; iteration ends, no error."""
    listed = await kube_client.list(CONFIG_MAP, namespace=kube_namespace)
    started = time.monotonic()
    async with kube_client.watch(
        CONFIG_MAP,
        namespace=kube_namespace,
        label_selector=WATCHED,  # none: not even the namespace's kube-root-ca.crt
        resource_version=listed.resource_version,
        timeout_seconds=1,
    ) as stream:
        events = [event async for event in stream]
    assert [e for e in events if e.type != "BOOKMARK"] == []
    assert time.monotonic() - started < 10


_IMPORTS = """
import asyncio, importlib, json, sys
from arcflow.common.kube import CONFIG_MAP, KubeClient, KubeConnectionError
from arcflow.common.kube.lite import LiteKubeSettings

for name in sys.argv[2:]:
    importlib.import_module(name)

async def main():
    settings = LiteKubeSettings(kubeconfig=sys.argv[1], request_timeout=2)
    async with await KubeClient.from_settings(settings) as kube:
        try:
            await kube.get(CONFIG_MAP, "x", "default")
        except KubeConnectionError:
            pass

asyncio.run(main())
print(json.dumps(sorted(m for m in ("kubernetes_asyncio", "aiohttp") if sys.modules.get(m))))
"""


def test_no_kubernetes_asyncio_in_a_service_process(tmp_path: Path) -> None:
    """Each service's entry module, and a client from a token kubeconfig that sends a request:
    kubernetes_asyncio is never imported (only an exec-plugin or auth-provider kubeconfig
    needs it). The client by itself imports no aiohttp either; a service still does, through
    nats-py (its optional WebSocket transport) and the health server."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [
                    {"name": "c", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )

    def imported(*modules: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-c", _IMPORTS, str(kubeconfig), *modules],
            capture_output=True,
            text=True,
            check=True,
        )
        return list(json.loads(result.stdout))

    assert imported() == []
    services = (
        "arcflow.watcher.service",
        "arcflow.registrar.service",
        "arcflow.reconciler.service",
        "arcflow.listener.app",
    )
    for service in services:
        assert "kubernetes_asyncio" not in imported(service), service
