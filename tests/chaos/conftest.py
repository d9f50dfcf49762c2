"""The chaos suite's Kubernetes: the test session's real control plane (each stack works in
namespaces of its own there), or the emulator when the session runs on it
(``ARCFLOW_TEST_KUBE=emulator``) or on an outside cluster (``ARCFLOW_TEST_KUBECONFIG``: a
chaos test restarts the API server, which only a control plane of our own allows)."""

from __future__ import annotations

import pytest

from arcflow.devstack.control_plane import ControlPlane
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig


@pytest.fixture
def chaos_kube(request: pytest.FixtureRequest) -> ControlPlane | str:
    """What a :class:`~tests.chaos.harness.ChaosStack` is given as ``kube_backend``."""
    if backend() == APISERVER and not real_kubeconfig():
        plane: ControlPlane = request.getfixturevalue("control_plane")
        return plane
    return "emulator"
