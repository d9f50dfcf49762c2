"""KubeClient over HTTP against the emulator: settings, rate limiting, connection errors."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from arcflow.common.kube import (
    CONFIG_MAP,
    KubeClient,
    KubeConnectionError,
    KubeSettings,
)
from arcflow.devstack.kube_emulator import KubeEmulator

pytestmark = pytest.mark.integration


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_KUBE_KUBECONFIG", "/tmp/kc")
    monkeypatch.setenv("ARCFLOW_KUBE_QPS", "5")
    monkeypatch.setenv("ARCFLOW_KUBE_BURST", "7")
    monkeypatch.setenv("ARCFLOW_KUBE_IN_CLUSTER", "false")
    settings = KubeSettings()
    assert (settings.kubeconfig, settings.qps, settings.burst) == ("/tmp/kc", 5.0, 7)


async def test_rate_limiter_paces_requests(kube_emulator: KubeEmulator, tmp_path: Path) -> None:
    path = kube_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    settings = KubeSettings(kubeconfig=str(path), qps=20, burst=2)
    async with await KubeClient.from_settings(settings) as client:
        started = time.monotonic()
        await asyncio.gather(*(client.list(CONFIG_MAP, namespace="default") for _ in range(6)))
        elapsed = time.monotonic() - started
    # 2 at once, then 4 more at 20/s: at least ~0.2 s.
    assert elapsed >= 0.18


async def test_unreachable_server_is_a_typed_error(tmp_path: Path) -> None:
    emulator = KubeEmulator()
    await emulator.start()
    path = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    await emulator.stop()
    async with await KubeClient.from_settings(
        KubeSettings(kubeconfig=str(path), request_timeout=2)
    ) as client:
        with pytest.raises(KubeConnectionError):
            await client.get(CONFIG_MAP, "x", "default")


async def test_repr_hides_configuration(kube_client: KubeClient) -> None:
    assert "token" not in repr(kube_client).lower()
    assert "arcflow-emulator-no-auth" not in repr(kube_client)


async def test_create_needs_namespace_for_namespaced_kinds(kube_client: KubeClient) -> None:
    with pytest.raises(ValueError, match="namespaced"):
        await kube_client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        )
