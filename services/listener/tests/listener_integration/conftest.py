"""Fixtures for the listener integration tests: the session's real kube-apiserver; a test
that asserts on the listener's requests asks for ``kube_proxy`` (the fault proxy in front of
it, which records them), and the rig's kubeconfig then points at the proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kube_fault_proxy import KubeFaultProxy
from arcflow.devstack.nats_server import NatsServer
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig

from .helpers import ListenerRig


@pytest.fixture
def sim_fast(actions_sim: ActionsSimulator) -> ActionsSimulator:
    """The simulator with 1 s long polls, so idle ticks come quickly."""
    actions_sim.set_poll_timeout(1.0)
    return actions_sim


@pytest.fixture
async def kube_proxy(request: pytest.FixtureRequest) -> AsyncIterator[KubeFaultProxy]:
    """The fault proxy in front of the session's kube-apiserver (as its admin)."""
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("the fault proxy stands in front of the session's real kube-apiserver")
    plane: ControlPlane = request.getfixturevalue("control_plane")
    async with KubeFaultProxy.for_control_plane(plane) as proxy:
        yield proxy


@pytest.fixture
def rig(
    request: pytest.FixtureRequest,
    sim_fast: ActionsSimulator,
    kube_client: KubeClient,
    kube_kubeconfig: str,
    kube_namespace: str,
    private_nats_server: NatsServer,
    tmp_path: Path,
) -> ListenerRig:
    kubeconfig = Path(kube_kubeconfig)
    if "kube_proxy" in request.fixturenames:
        proxy: KubeFaultProxy = request.getfixturevalue("kube_proxy")
        kubeconfig = proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig")
    return ListenerRig(
        sim=sim_fast,
        kube=kube_client,
        namespace=kube_namespace,
        nats_url=private_nats_server.url,
        kubeconfig=kubeconfig,
    )
