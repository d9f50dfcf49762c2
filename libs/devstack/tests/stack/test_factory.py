"""The stack factory on both Kubernetes backends: what it starts answers, what it started is
stopped at the end (nothing left running), and a start that fails stops what had started."""

from __future__ import annotations

import asyncio
import secrets
import socket
from pathlib import Path

import nats
import pytest

from arcflow.common.kube import NAMESPACE, SERVICE_ACCOUNT, KubeClient, NotFoundError
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.factory import StackFactory, StackStartError
from arcflow.devstack.kubelet import ApiCaller
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _listening(url: str) -> bool:
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


async def test_emulator_stack_runs_and_stops_everything(tmp_path: Path) -> None:
    factory = StackFactory(
        kube="emulator", services=("watcher",), proxy=True, healthy_within=60, poll_timeout=1
    )
    async with factory as parts:
        assert parts.kube_backend == "emulator"
        assert parts.emulator is not None
        assert parts.simulator is not None
        assert parts.pod_runner is not None
        nc = await nats.connect(parts.nats_url)
        assert nc.is_connected
        await nc.close()
        names = {n["metadata"]["name"] for n in (await parts.kube.list(NAMESPACE)).items}
        assert "arc-systems" in names
        watcher = parts.services["watcher"]
        assert watcher.healthy()
        assert parts.proxy is not None

        async def watcher_counted() -> bool:
            return any(v == "watch" for v, _ in parts.proxy.counts["watcher"])  # type: ignore[union-attr]

        await eventually(watcher_counted, within=30, what="the watcher's watches via the proxy")
        process = watcher.process.process
        temp, nats_url, emulator_url = parts.temp, parts.nats_url, parts.emulator.url
    assert process is not None
    assert process.returncode is not None, "the watcher still runs"
    assert not _listening(nats_url), "nats-server still listens"
    assert not _listening(emulator_url), "the emulator still listens"
    assert not temp.exists(), "the temp folder is left"


async def test_shared_control_plane_stack_creates_and_removes_its_namespaces(
    control_plane: ControlPlane, kube_client: KubeClient, on_real_server: bool
) -> None:
    if not on_real_server:
        pytest.skip("needs the session's real kube-apiserver")
    namespace = f"factory-{secrets.token_hex(3)}"
    factory = StackFactory(
        kube=control_plane,
        controller_namespace=f"{namespace}-systems",
        namespaces=[namespace],
        services=("watcher",),
        healthy_within=60,
    )
    async with factory as parts:
        assert parts.kube_backend == "apiserver"
        assert parts.control_plane is control_plane
        assert parts.namespaces == [f"{namespace}-systems", namespace]
        for name in parts.namespaces:  # pods may be created there at once
            await parts.kube.get(SERVICE_ACCOUNT, "default", name)
        assert parts.pod_runner is not None
        node = parts.pod_runner.node
        assert node is not None
        assert node.name.startswith("arcflow-node-"), "a shared server needs a Node per stack"
        process = parts.services["watcher"].process.process
    assert process is not None
    assert process.returncode is not None
    assert control_plane.running, "a shared control plane must outlive the stack"

    async def removed() -> bool:
        for name in (namespace, f"{namespace}-systems"):
            try:
                got = await kube_client.get(NAMESPACE, name)
            except NotFoundError:
                continue
            assert got["metadata"].get("deletionTimestamp"), f"{name} not deleted"
        return True

    await eventually(removed, within=10, what="the stack's namespaces deleted")
    api = ApiCaller.from_kubeconfig(control_plane.kubeconfig)
    try:
        with pytest.raises(NotFoundError):
            await api.request("GET", f"/api/v1/nodes/{node.name}")
    finally:
        await api.close()


async def test_own_control_plane_is_started_with_audit_and_stopped() -> None:
    factory = StackFactory(
        kube="apiserver", audit=True, simulator=False, pod_runner=False, services=()
    )
    async with factory as parts:
        plane = parts.control_plane
        assert plane is not None
        assert plane.running
        await parts.kube.list(NAMESPACE)
        assert plane.audit_log.exists(), "audit=True writes the audit log"
        url = plane.url
    assert not plane.running
    assert not _listening(url), "kube-apiserver still listens"


async def test_a_failed_start_stops_what_had_started() -> None:
    factory = StackFactory(
        kube="emulator", services=("no_such_service",), pod_runner=True, healthy_within=3
    )
    with pytest.raises(StackStartError, match="no_such_service not healthy"):
        async with factory:
            raise AssertionError("the start should have failed")
    parts = factory.parts
    assert parts is not None
    assert parts.nats is not None
    assert not parts.nats.running
    assert parts.emulator is not None
    assert not _listening(parts.emulator.url)
    assert not parts.temp.exists()


async def test_a_cancelled_start_stops_what_had_started() -> None:
    factory = StackFactory(kube="emulator", services=("watcher",), healthy_within=60)
    starting = asyncio.create_task(factory.__aenter__())

    async def services_starting() -> bool:
        parts = factory.parts
        return parts is not None and parts.pod_runner is not None

    await eventually(services_starting, within=60, what="the start reaching the pod runner")
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    parts = factory.parts
    assert parts is not None
    assert parts.nats is not None
    assert not parts.nats.running
    assert not parts.temp.exists()
