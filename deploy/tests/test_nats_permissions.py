"""The charts carry the generated NATS permissions, and the generated files are current."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from arcflow.common.nats.permissions import SERVICES, password_placeholder, permissions_json
from arcflow.devstack.nats_server import find_nats_server_binary
from deploy.tests.helpers import HELM_DIR, REPO_ROOT, SERVICE_CHARTS, Helm

CHART_SERVICES = {
    "arcflow-watcher": ["watcher"],
    "arcflow-registrar": ["registrar"],
    "arcflow-reconciler": ["reconciler", "listener"],
}
AUTH_CONF = REPO_ROOT / "deploy" / "nats" / "authorization.conf"


def test_generated_files_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "generate_nats_permissions.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_chart_file_equals_the_generated_permissions(chart: str) -> None:
    path = HELM_DIR / chart / "files" / "nats-permissions.json"
    assert path.read_text() == permissions_json(CHART_SERVICES[chart])


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_configmap_shows_the_generated_permissions(helm: Helm, chart: str) -> None:
    docs = helm.render(chart)
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert [m["metadata"]["name"] for m in maps] == [
        f"demo-{chart.removeprefix('arcflow-')}-nats-permissions"
    ]
    shown = json.loads(maps[0]["data"]["nats-permissions.json"])
    assert shown == json.loads(permissions_json(CHART_SERVICES[chart]))


def test_configmap_can_be_turned_off(helm: Helm) -> None:
    docs = helm.render("arcflow-watcher", values={"natsPermissions": {"configMap": False}})
    assert not [d for d in docs if d["kind"] == "ConfigMap"]


def test_authorization_conf_is_valid_for_nats_server() -> None:
    """The real binary accepts the committed file once the password variables are set."""
    env = {**os.environ}
    for service in SERVICES:
        env[password_placeholder(service).removeprefix("$")] = f"pw{service}"
    done = subprocess.run(
        [find_nats_server_binary(), "-t", "-c", str(AUTH_CONF)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    missing = subprocess.run(
        [find_nats_server_binary(), "-t", "-c", str(AUTH_CONF)],
        capture_output=True,
        text=True,
        env={k: v for k, v in env.items() if k != "ARCFLOW_AUDITOR_PASSWORD"},
        timeout=30,
        check=False,
    )
    assert missing.returncode != 0
    assert "ARCFLOW_AUDITOR_PASSWORD" in missing.stderr + missing.stdout
