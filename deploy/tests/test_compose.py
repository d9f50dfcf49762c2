"""docker-compose.yml is valid for Compose v2 (checked by the real binary, no engine needed) and
wires the stack the way the services read their settings."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.tests.helpers import REPO_ROOT

pytestmark = pytest.mark.integration

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
SERVICES = ("watcher", "registrar", "reconciler")


def _compose(binary: Path, compose_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # without the variables the file reads, so the defaults written in it are what is checked
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCFLOW_", "COMPOSE_"))}
    return subprocess.run(
        [str(binary), "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=compose_file.parent,
        env=env,
    )


@pytest.fixture(scope="module")
def normalized(compose_binary: Path) -> dict[str, Any]:
    """The file as Compose itself resolves it (anchors, merges, defaults, every profile)."""
    done = _compose(
        compose_binary, COMPOSE_FILE, "--profile", "images", "config", "--format", "yaml"
    )
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert isinstance(data, dict)
    return data


def test_compose_file_is_valid(compose_binary: Path) -> None:
    done = _compose(compose_binary, COMPOSE_FILE, "config", "-q")
    assert done.returncode == 0, done.stderr


def test_broken_compose_file_fails(compose_binary: Path, tmp_path: Path) -> None:
    """Proves the rc above is real: the same file with a dangling depends_on is rejected."""
    broken = tmp_path / "docker-compose.yml"
    text = COMPOSE_FILE.read_text()
    assert "      kube-api:\n        condition: service_healthy" in text
    broken.write_text(
        text.replace(
            "      kube-api:\n        condition: service_healthy",
            "      kube-apiserver:\n        condition: service_healthy",
            1,
        )
    )
    done = _compose(compose_binary, broken, "config", "-q")
    assert done.returncode != 0
    assert "kube-apiserver" in done.stderr


def test_every_referenced_dockerfile_exists(normalized: dict[str, Any]) -> None:
    built = {name: svc["build"] for name, svc in normalized["services"].items() if "build" in svc}
    assert set(SERVICES) | {"kube-api", "actions-sim", "listener"} <= set(built)
    for name, build in built.items():
        dockerfile = Path(build["context"]) / build["dockerfile"]
        assert dockerfile.is_file(), f"{name}: {dockerfile} is missing"
        text = dockerfile.read_text()
        assert "uv sync --frozen --package arcflow-" in text
        assert "--no-dev" in text
        assert "USER 10001:10001" in text


@pytest.mark.parametrize(
    ("dockerfile", "entry"),
    [
        ("services/watcher/Dockerfile", '["python", "-m", "arcflow.watcher"]'),
        ("services/registrar/Dockerfile", '["python", "-m", "arcflow.registrar"]'),
        ("services/reconciler/Dockerfile", '["python", "-m", "arcflow.reconciler"]'),
        ("services/listener/Dockerfile", '["/ghalistener"]'),
        ("libs/devstack/Dockerfile", '["arcflow"]'),
    ],
)
def test_dockerfiles_run_their_package(dockerfile: str, entry: str) -> None:
    text = (REPO_ROOT / dockerfile).read_text()
    assert f"ENTRYPOINT {entry}" in text
    assert text.count("FROM ") >= 2, "multi-stage: no build tools in the runtime image"


def test_nats_runs_jetstream_with_a_monitoring_healthcheck(normalized: dict[str, Any]) -> None:
    nats = normalized["services"]["nats"]
    assert nats["image"].startswith("nats:2.10")
    assert "--jetstream" in nats["command"]
    test = " ".join(nats["healthcheck"]["test"])
    assert "8222/healthz" in test


def test_services_wait_for_healthy_dependencies(normalized: dict[str, Any]) -> None:
    services = normalized["services"]
    for name in SERVICES:
        depends = services[name]["depends_on"]
        assert depends["nats"]["condition"] == "service_healthy"
        assert depends["kube-api"]["condition"] == "service_healthy"
        assert "healthcheck" in services[name]
    assert services["registrar"]["depends_on"]["actions-sim"]["condition"] == "service_healthy"
    for name in ("nats", "kube-api", "actions-sim"):
        assert "healthcheck" in services[name], name


def test_services_are_wired_to_nats_and_the_emulator(normalized: dict[str, Any]) -> None:
    services = normalized["services"]
    for name in SERVICES:
        env = services[name]["environment"]
        assert env["ARCFLOW_NATS_URL"] == "nats://nats:4222"
        assert env["ARCFLOW_KUBE_KUBECONFIG"] == "/etc/arcflow/kubeconfig"
        assert services[name]["read_only"] is True
        assert services[name]["user"] == "10001:10001"
        assert services[name]["cap_drop"] == ["ALL"]
    kubeconfig = yaml.safe_load(normalized["configs"]["kubeconfig"]["content"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "http://kube-api:6443"
    assert services["kube-api"]["command"][:2] == ["sim", "kube"]
    assert "6443" in services["kube-api"]["command"]
    assert services["actions-sim"]["command"][:2] == ["sim", "actions"]
    assert "0.0.0.0" in services["actions-sim"]["command"]
    listener_image = services["reconciler"]["environment"]["ARCFLOW_RECONCILER_LISTENER_IMAGE"]
    assert listener_image == services["listener"]["image"]
