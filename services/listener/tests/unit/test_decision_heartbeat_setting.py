"""The decision heartbeat setting (ADR 0061): options, then the environment, then 300 s
(ADR 0122)."""

from __future__ import annotations

import pytest

from arcflow.listener.app import DECISION_HEARTBEAT_ENV, ListenerOptions, decision_heartbeat
from arcflow.listener.config import ConfigError


def test_default_is_five_minutes() -> None:
    assert decision_heartbeat(ListenerOptions(environ={})) == 300.0


def test_environment_and_options() -> None:
    assert decision_heartbeat(ListenerOptions(environ={DECISION_HEARTBEAT_ENV: "15"})) == 15.0
    options = ListenerOptions(environ={DECISION_HEARTBEAT_ENV: "15"}, decision_heartbeat=2.5)
    assert decision_heartbeat(options) == 2.5


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_value_is_a_configuration_error(raw: str) -> None:
    with pytest.raises(ConfigError, match=DECISION_HEARTBEAT_ENV):
        decision_heartbeat(ListenerOptions(environ={DECISION_HEARTBEAT_ENV: raw}))
