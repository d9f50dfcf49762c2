"""Fixtures for the listener integration tests."""

from __future__ import annotations

import pytest

from arcflow.devstack.actions_sim import ActionsSimulator


@pytest.fixture
def sim_fast(actions_sim: ActionsSimulator) -> ActionsSimulator:
    """The simulator with 1 s long polls, so idle ticks come quickly."""
    actions_sim.set_poll_timeout(1.0)
    return actions_sim
