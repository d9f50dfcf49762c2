"""Root conftest: registers the shared fixture modules for every test directory, and gives the
markers the README's loops select by: every ``chaos`` test is a ``scenario`` test, and every
``scenario`` test and every test that starts a real server through a fixture (nats-server, the
control plane, the Kubernetes emulator, the Actions simulator, Prometheus, a real node) is an
``integration`` test, so the fast loop ``-m "not integration"`` runs the unit and pure tests
only."""

from __future__ import annotations

import pytest

from tests.markers import COLLECTED_MARKERS, marker_names

pytest_plugins = [
    "tests.fixtures.nats",
    "tests.fixtures.kube",
    "tests.fixtures.actions",
    "tests.fixtures.prometheus",
    "tests.fixtures.node",
    "tests.fixtures.helm_node",
    "tests.file_order",
]


#: Fixtures that start a real server (or need one): a test using any of them, directly or through
#: another fixture, is an ``integration`` test.
REAL_SERVER_FIXTURES = frozenset(
    {
        "nats_server",
        "private_nats_server",
        "control_plane",
        "kube_emulator",
        "kube_kubeconfig",
        "actions_sim",
        "actions_sim_acquire",
        "prometheus",
        "kube_node",
    }
)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects, so the added markers count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every ``chaos`` test (whole stacks of real processes, minutes each) is a ``scenario``
    test too: ``-m "not scenario"`` skips both, ``-m chaos`` still picks the chaos ones. Every
    ``scenario`` test and every test on a real server is ``integration``."""
    for item in items:
        if item.get_closest_marker("chaos") is not None and not item.get_closest_marker("scenario"):
            item.add_marker(pytest.mark.scenario)
        on_server = REAL_SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if (on_server or item.get_closest_marker("scenario")) and not item.get_closest_marker(
            "integration"
        ):
            item.add_marker(pytest.mark.integration)
    config.stash[COLLECTED_MARKERS] = marker_names(items)
