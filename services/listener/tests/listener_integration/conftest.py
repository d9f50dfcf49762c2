"""Fixtures for the listener integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcflow.common.kube import KubeClient
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.nats_server import NatsServer

from .helpers import ListenerRig


@pytest.fixture
def sim_fast(actions_sim: ActionsSimulator) -> ActionsSimulator:
    """The simulator with 1 s long polls, so idle ticks come quickly."""
    actions_sim.set_poll_timeout(1.0)
    return actions_sim


@pytest.fixture
def rig(
    sim_fast: ActionsSimulator,
    kube_client: KubeClient,
    kube_emulator: KubeEmulator,
    kube_namespace: str,
    private_nats_server: NatsServer,
    tmp_path: Path,
) -> ListenerRig:
    return ListenerRig(
        sim=sim_fast,
        kube=kube_client,
        namespace=kube_namespace,
        nats_url=private_nats_server.url,
        kubeconfig=kube_emulator.write_kubeconfig(tmp_path / "kubeconfig"),
    )
