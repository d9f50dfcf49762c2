"""Root conftest: registers the shared fixture modules for every test directory, and makes the
README's fast loop (``-m "not scenario"``) leave out the chaos tests as well."""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.fixtures.nats",
    "tests.fixtures.kube",
    "tests.fixtures.actions",
]


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects, so the added marker counts
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every ``chaos`` test (whole stacks of real processes, minutes each) is a ``scenario``
    test too: ``-m "not scenario"`` skips both, ``-m chaos`` still picks the chaos ones."""
    for item in items:
        if item.get_closest_marker("chaos") is not None and not item.get_closest_marker("scenario"):
            item.add_marker(pytest.mark.scenario)
