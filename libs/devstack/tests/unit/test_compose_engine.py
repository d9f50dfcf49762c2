"""The pure parts of arcflow.devstack.compose_engine; the engine itself runs in
deploy/tests/test_compose_podman.py (root, podman)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from arcflow.devstack.compose_engine import (
    CONTAINERS_CONF,
    ComposeEngine,
    EngineError,
    _healthcheck_interval,
    label_filter,
)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"Healthcheck": {"Test": ["CMD", "true"], "Interval": 5_000_000_000}}, 5.0),
        ({"Healthcheck": {"Test": ["CMD-SHELL", "true"]}}, 30.0),  # Docker's default interval
        ({"Healthcheck": {"Test": ["NONE"]}}, None),
        ({"Healthcheck": None}, None),
        ({}, None),
    ],
)
def test_healthcheck_interval(config: dict[str, object], expected: float | None) -> None:
    assert _healthcheck_interval({"Config": config}) == expected


def test_label_filter_names_the_compose_project() -> None:
    assert json.loads(unquote(label_filter("arcflow"))) == {
        "label": ["com.docker.compose.project=arcflow"]
    }


def test_engine_environment_points_compose_at_the_socket(tmp_path: Path) -> None:
    engine = ComposeEngine(tmp_path, netns="arcflow-compose-test")
    env = engine.env()
    assert env["DOCKER_HOST"] == f"unix://{tmp_path / 'podman.sock'}"
    assert env["DOCKER_BUILDKIT"] == "0"
    assert engine.command(["arcflow", "audit"]) == [
        "nsenter",
        "--net=/run/netns/arcflow-compose-test",
        "--",
        "arcflow",
        "audit",
    ]
    assert 'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]' in CONTAINERS_CONF


def test_attach_without_a_started_engine_says_so(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no engine started"):
        ComposeEngine.attach(tmp_path)
