"""KubeClient over HTTP against a real kube-apiserver: settings, rate limiting, connection
errors, what its repr leaves out."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import yaml

from arcflow.common.kube import (
    CONFIG_MAP,
    KubeClient,
    KubeConnectionError,
    KubeSettings,
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
