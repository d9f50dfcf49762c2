"""kubernetes_asyncio's own typed APIs and Watch helper against the emulator, plus discovery
and the ``arcflow sim kube`` command."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from arcflow.devstack.kube_emulator import KubeEmulator

pytestmark = pytest.mark.integration


async def test_typed_core_api_roundtrip(kube_emulator: KubeEmulator) -> None:
    async with client.ApiClient(client.Configuration(host=kube_emulator.url)) as api:
        core = client.CoreV1Api(api)
        created = await core.create_namespaced_service_account("arc", {"metadata": {"name": "sa"}})
        assert created.metadata.uid  # a 201 with a body, so the typed client returns it
        listed = await core.list_namespaced_service_account("arc")
        assert [sa.metadata.name for sa in listed.items] == ["sa"]
        version = await client.VersionApi(api).get_code()
        assert version.major == "1"


async def test_kubernetes_asyncio_watch_sees_410(kube_emulator: KubeEmulator) -> None:
    async with client.ApiClient(client.Configuration(host=kube_emulator.url)) as api:
        core = client.CoreV1Api(api)
        first = await core.create_namespaced_config_map("arc", {"metadata": {"name": "a"}})
        await core.create_namespaced_config_map("arc", {"metadata": {"name": "b"}})
        kube_emulator.expire_history()
        watcher = watch.Watch()

        async def drain() -> None:
            async with asyncio.timeout(5):
                async for _ in watcher.stream(
                    core.list_namespaced_config_map,
                    "arc",
                    resource_version=first.metadata.resource_version,
                    timeout_seconds=2,
                ):
                    pass

        with pytest.raises(ApiException) as caught:
            await drain()
        await watcher.close()
        assert caught.value.status == 410


async def test_watch_true_capitalised_is_a_stream(kube_emulator: KubeEmulator) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{kube_emulator.url}/api/v1/namespaces/default/configmaps"
        async with http.get(url, params={"watch": "True", "timeoutSeconds": "1"}) as response:
            assert response.status == 200
            assert await response.read() == b""


async def test_discovery_documents(kube_emulator: KubeEmulator) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{kube_emulator.url}/apis") as response:
            groups = {g["name"] for g in (await response.json())["groups"]}
        assert {"actions.github.com", "rbac.authorization.k8s.io"} <= groups
        async with http.get(f"{kube_emulator.url}/apis/actions.github.com/v1alpha1") as response:
            body = await response.json()
        names = {r["name"] for r in body["resources"]}
        assert {
            "autoscalingrunnersets",
            "autoscalingrunnersets/status",
            "ephemeralrunners",
        } <= names
        async with http.get(f"{kube_emulator.url}/api/v1") as response:
            core = {r["name"] for r in (await response.json())["resources"]}
        assert {"pods", "pods/status", "secrets", "serviceaccounts", "events"} <= core
        async with http.get(f"{kube_emulator.url}/apis/nope.example.com") as response:
            assert response.status == 404


async def test_requests_are_recorded_without_bodies(kube_emulator: KubeEmulator) -> None:
    async with aiohttp.ClientSession() as http:
        await http.post(
            f"{kube_emulator.url}/api/v1/namespaces/arc/secrets",
            json={"metadata": {"name": "s"}, "stringData": {"token": "hunter2"}},
        )
    recorded = kube_emulator.requests[-1]
    assert (recorded.method, recorded.path) == ("POST", "/api/v1/namespaces/arc/secrets")
    assert "hunter2" not in repr(list(kube_emulator.requests))


async def test_sim_kube_command(tmp_path: Path) -> None:
    arcflow = Path(sys.executable).parent / "arcflow"
    kubeconfig = tmp_path / "out" / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        str(arcflow),
        "sim",
        "kube",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ},
    )
    try:
        assert process.stdout is not None
        first = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        second = (await asyncio.wait_for(process.stdout.readline(), 5)).decode()
        assert first.strip() == f"kubeconfig: {kubeconfig}"
        url = second.strip().removeprefix("url: ")
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server == url
        async with aiohttp.ClientSession() as http, http.get(f"{url}/version") as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
