"""A Docker engine for ``docker compose`` on a machine without one: podman's Docker Engine API
service (``podman system service``), rootful, in a network namespace of its own (ADR 0075,
docs/deploy.md "docker compose on podman").

The compose binary reaches the service through ``DOCKER_HOST=unix://<socket>`` (a socket is a
file, so the compose binary itself runs outside the namespace). The compose network's bridge,
the containers' private addresses and the ports the file publishes on ``127.0.0.1`` all exist
only inside the namespace, which has nothing but its own loopback: nothing routes out. A command
that talks to a published port runs in it through :meth:`ComposeEngine.command`
(``nsenter --net``, which keeps the host's mount namespace).

What the service gets, without touching the compose file:

* a ``containers.conf`` of its own (``CONTAINERS_CONF``): runc (crun refuses this machine's
  hybrid cgroup layout), cgroupfs (no systemd), and open-files/processes limits a process here
  may set (podman's defaults are above what the sandbox allows, and runc then fails with
  "error setting rlimit type 7");
* a ``registries.conf`` of its own (``CONTAINERS_REGISTRIES_CONF``) that blocks the public
  registries: an image the file names must already be in podman's store, nothing is pulled;
* ``DISABLE_HC_SYSTEMD=true``: podman 4.3 runs healthchecks from systemd timers, and there is no
  systemd here; :func:`drive_healthchecks` runs each container's healthcheck at its interval
  through the API instead (a process of its own, started and stopped with the service).

:meth:`ComposeEngine.stop` removes what compose left of the named projects (containers with
their anonymous volumes, named volumes, networks, pods, by compose's project label), stops the
service and the healthcheck driver, ends whatever else still runs in the namespace (only this
engine starts processes there) and deletes the namespace.

``python -m arcflow.devstack.compose_engine start|stop|env|run`` is the same for a person
(``scripts/compose-podman.sh`` wraps it).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

#: Where ``ip netns add`` keeps named network namespaces.
NETNS_DIR: Final = Path("/run/netns")
#: The label compose puts on every container, network and volume of a project.
PROJECT_LABEL: Final = "com.docker.compose.project"
#: This module, run by :meth:`ComposeEngine.start` as the healthcheck driver.
MODULE: Final = "arcflow.devstack.compose_engine"
#: The libpod API prefix (podman's own endpoints beside the Docker-compatible ones).
LIBPOD: Final = "/v4.0.0/libpod"

CONTAINERS_CONF: Final = """\
# Written by arcflow.devstack.compose_engine for its podman API service.
[containers]
# The sandbox lets no process raise its own limits: podman's defaults (1048576 open files) make
# runc fail with "error setting rlimit type 7: operation not permitted".
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
# crun refuses this machine's hybrid cgroup layout; there is no systemd to manage cgroups.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
network_backend = "cni"
"""

REGISTRIES_CONF: Final = """\
# Written by arcflow.devstack.compose_engine: no registry is reachable, and none is tried.
# Short names resolve to docker.io as Docker's do; images must already be in podman's store.
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"

[[registry]]
location = "docker.io"
blocked = true

[[registry]]
location = "ghcr.io"
blocked = true

[[registry]]
location = "quay.io"
blocked = true
"""


class EngineError(RuntimeError):
    """The engine could not start, or an API call failed."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("podman", timeout=timeout)
        self._path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


@dataclass(frozen=True)
class Api:
    """The service's REST API over its unix socket (Docker's endpoints and libpod's)."""

    socket: Path

    def call(self, method: str, path: str, *, timeout: float = 30.0) -> tuple[int, Any]:
        connection = _UnixConnection(self.socket, timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            body = response.read()
        except OSError as exc:
            raise EngineError(f"{method} {path}: {exc}") from exc
        finally:
            connection.close()
        try:
            return response.status, json.loads(body) if body else None
        except json.JSONDecodeError:
            return response.status, body.decode(errors="replace")

    def get(self, path: str, *, timeout: float = 30.0) -> Any:
        status, body = self.call("GET", path, timeout=timeout)
        if status >= 300:
            raise EngineError(f"GET {path}: {status} {body}")
        return body

    def ping(self) -> bool:
        try:
            return self.call("GET", "/_ping", timeout=2.0)[0] == 200
        except EngineError:
            return False


def label_filter(project: str) -> str:
    return quote(json.dumps({"label": [f"{PROJECT_LABEL}={project}"]}))


def project_objects(api: Api, project: str) -> dict[str, list[str]]:
    """What exists of a compose project: container, network, volume and pod names."""
    labels = label_filter(project)
    volumes = api.get(f"/volumes?filters={labels}") or {}
    return {
        "containers": [
            c["Names"][0].lstrip("/") for c in api.get(f"/containers/json?all=1&filters={labels}")
        ],
        "networks": [n["Name"] for n in api.get(f"/networks?filters={labels}")],
        "volumes": [v["Name"] for v in volumes.get("Volumes") or []],
        "pods": [p["Name"] for p in api.get(f"{LIBPOD}/pods/json?filters={labels}") or []],
    }


def remove_project(api: Api, project: str) -> list[str]:
    """Remove every object of ``project`` (as ``docker compose down -v`` does, and its pods);
    returns what was removed, ``kind/name`` each."""
    removed = []
    found = project_objects(api, project)
    for kind, path in (
        ("containers", "/containers/{}?force=1&v=1"),
        ("pods", LIBPOD + "/pods/{}?force=true"),
        ("volumes", "/volumes/{}?force=1"),
        ("networks", "/networks/{}"),
    ):
        for name in found[kind]:
            status, body = api.call("DELETE", path.format(quote(name)), timeout=60.0)
            if status >= 300 and status != 404:
                raise EngineError(f"removing {kind} {name}: {status} {body}")
            removed.append(f"{kind}/{name}")
    return removed


# --- healthchecks --------------------------------------------------------------------------------


def _healthcheck_interval(inspected: Mapping[str, Any]) -> float | None:
    check = (inspected.get("Config") or {}).get("Healthcheck") or {}
    test = check.get("Test") or []
    if not test or test == ["NONE"]:
        return None
    return float(check.get("Interval") or 30_000_000_000) / 1e9  # Docker's default: 30 s


def drive_healthchecks(api: Api, stop: threading.Event, *, poll: float = 1.0) -> None:
    """Run every running container's healthcheck at its interval, counted from when the
    container was first seen running, as Docker's engine does; until ``stop`` is set.

    podman keeps the status, the failing streak, the start period and the retries; this only
    triggers its check (``GET /libpod/containers/<id>/healthcheck``), one thread per check."""
    due: dict[str, float] = {}
    intervals: dict[str, float | None] = {}
    busy: set[str] = set()
    lock = threading.Lock()

    def check(container: str) -> None:
        try:
            api.call("GET", f"{LIBPOD}/containers/{container}/healthcheck", timeout=120.0)
        except EngineError:
            pass  # the container went away; the next listing tells
        finally:
            with lock:
                busy.discard(container)

    while not stop.is_set():
        try:
            running = [c["Id"] for c in api.get("/containers/json", timeout=10.0)]
        except EngineError:
            stop.wait(poll)
            continue
        now = time.monotonic()
        for container in running:
            if container not in intervals:
                try:
                    intervals[container] = _healthcheck_interval(
                        api.get(f"/containers/{container}/json", timeout=10.0)
                    )
                except EngineError:
                    continue
            interval = intervals[container]
            if interval is None:
                continue
            if container not in due:
                due[container] = now + interval
            with lock:
                if now < due[container] or container in busy:
                    continue
                busy.add(container)
            due[container] = now + interval
            threading.Thread(target=check, args=(container,), daemon=True).start()
        for gone in set(due) - set(running):
            del due[gone]
        stop.wait(poll)


# --- the engine ----------------------------------------------------------------------------------


@dataclass
class ComposeEngine:
    """podman's API service in a network namespace of its own, and its healthcheck driver.

    ``state_dir`` holds the socket, the two configuration files, the service's log and
    ``engine.json`` (the namespace and the process ids), so that another process can stop it.
    """

    state_dir: Path
    netns: str = field(default_factory=lambda: f"arcflow-compose-{secrets.token_hex(3)}")
    podman: str = "podman"
    startup_timeout: float = 60.0

    @property
    def socket(self) -> Path:
        return self.state_dir / "podman.sock"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def api(self) -> Api:
        return Api(self.socket)

    @property
    def log(self) -> Path:
        return self.state_dir / "service.log"

    def env(self) -> dict[str, str]:
        """What the compose binary (and a podman command) needs to use this engine. podman
        serves no BuildKit, so compose builds with the Docker API's classic builder."""
        return {
            "DOCKER_HOST": f"unix://{self.socket}",
            "DOCKER_BUILDKIT": "0",
            "CONTAINERS_CONF": str(self.state_dir / "containers.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(self.state_dir / "registries.conf"),
        }

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in the engine's network namespace (where the published ports are)."""
        return ["nsenter", f"--net={self.netns_path}", "--", *argv]

    def start(self) -> None:
        if os.geteuid() != 0:
            raise EngineError("podman's rootful API service and a network namespace need root")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "containers.conf").write_text(CONTAINERS_CONF)
        (self.state_dir / "registries.conf").write_text(REGISTRIES_CONF)
        self.socket.unlink(missing_ok=True)
        _run(["ip", "netns", "add", self.netns])
        try:
            _run(self.command(["ip", "link", "set", "lo", "up"]))
            env = {**os.environ, **self.env(), "DISABLE_HC_SYSTEMD": "true"}
            with self.log.open("ab") as log:
                serve = [self.podman, "--log-level=info", "system", "service", "--time=0"]
                service = subprocess.Popen(
                    self.command([*serve, f"unix://{self.socket}"]),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                driver = subprocess.Popen(
                    [sys.executable, "-m", MODULE, "healthchecks", "--socket", str(self.socket)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._save({"netns": self.netns, "service": service.pid, "driver": driver.pid})
            deadline = time.monotonic() + self.startup_timeout
            while not self.api.ping():
                if service.poll() is not None or time.monotonic() > deadline:
                    raise EngineError(
                        f"podman system service did not answer on {self.socket}:\n"
                        + self.log.read_text(errors="replace")[-3000:]
                    )
                time.sleep(0.2)
        except BaseException:
            self.stop(())
            raise

    def stop(self, projects: Sequence[str]) -> list[str]:
        """Remove the projects' objects, stop the service and the driver, delete the namespace.
        Safe to call twice. Returns what it removed and ended."""
        state = self._load()
        done: list[str] = []
        # The driver first: no healthcheck starts an exec session while containers go.
        if isinstance(state.get("driver"), int) and _end(state["driver"]):
            done.append("process/driver")
        if self.api.ping():
            for project in projects:
                done += remove_project(self.api, project)
        if isinstance(state.get("service"), int) and _end(state["service"]):
            done.append("process/service")
        if self.netns_path.exists():
            # What is left in the namespace (conmon of a cut-off exec session, dnsmasq) was
            # started by this engine alone, and its containers are gone: no grace period.
            for pid in _netns_pids(self.netns):
                if _end(pid, within=1.0):
                    done.append(f"process/{pid}")
            _run(["ip", "netns", "delete", self.netns])
            done.append(f"netns/{self.netns}")
        self.socket.unlink(missing_ok=True)
        (self.state_dir / "engine.json").unlink(missing_ok=True)
        return done

    def leftovers(self, projects: Sequence[str]) -> list[str]:
        """What is left of the engine and the projects after :meth:`stop` (empty when clean).
        Asks podman's CLI, as the service is gone by then."""
        left = [f"netns/{self.netns}"] if self.netns_path.exists() else []
        left += [f"socket/{self.socket}"] if self.socket.exists() else []
        state = self._load()
        left += [f"process/{state[r]}" for r in ("service", "driver") if _alive(state.get(r))]
        env = {**os.environ, **self.env()}
        for project in projects:
            label = f"label={PROJECT_LABEL}={project}"
            for kind, argv in (
                ("containers", ["ps", "--all", "--filter", label, "--format", "{{.Names}}"]),
                ("pods", ["pod", "ps", "--filter", label, "--format", "{{.Name}}"]),
                ("volumes", ["volume", "ls", "--filter", label, "--format", "{{.Name}}"]),
                ("networks", ["network", "ls", "--filter", label, "--format", "{{.Name}}"]),
            ):
                out = _run([self.podman, *argv], env=env)
                left += [f"{kind}/{name}" for name in out.split()]
        return left

    def _save(self, state: Mapping[str, Any]) -> None:
        (self.state_dir / "engine.json").write_text(json.dumps(state))

    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads((self.state_dir / "engine.json").read_text())
        except FileNotFoundError:
            return {}
        return state if isinstance(state, dict) else {}

    @classmethod
    def attach(cls, state_dir: Path) -> ComposeEngine:
        """The engine a ``start`` in another process left in ``state_dir``."""
        engine = cls(state_dir)
        netns = engine._load().get("netns")
        if not isinstance(netns, str):
            raise EngineError(f"no engine started in {state_dir}")
        engine.netns = netns
        return engine


def _run(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=env)
    if done.returncode != 0:
        raise EngineError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return status.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _end(pid: int, *, within: float = 20.0) -> bool:
    """SIGTERM, then SIGKILL after ``within`` seconds; True when it was running."""
    if not _alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + within
    while _alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return True


def _netns_pids(netns: str) -> list[int]:
    return [int(pid) for pid in _run(["ip", "netns", "pids", netns]).split()]


# --- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arcflow.devstack.compose_engine")
    parser.add_argument("--dir", type=Path, default=Path("/run/arcflow-compose-podman"))
    parser.add_argument("--project", action="append", default=None, help="default: arcflow")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("start", help="start the engine; prints its environment as export lines")
    sub.add_parser("env", help="print the running engine's environment as export lines")
    sub.add_parser("stop", help="remove the projects' objects and stop the engine")
    run = sub.add_parser("run", help="run a command in the namespace, with the engine's env")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    health = sub.add_parser("healthchecks", help=argparse.SUPPRESS)
    health.add_argument("--socket", type=Path, required=True)
    args = parser.parse_args(argv)
    projects = args.project or ["arcflow"]
    if args.action == "healthchecks":  # until the engine's stop ends it (SIGTERM's default)
        drive_healthchecks(Api(args.socket), threading.Event())
        return 0
    if args.action == "start":
        engine = ComposeEngine(args.dir)
        if (args.dir / "engine.json").exists():
            raise SystemExit(f"an engine is already started in {args.dir}: stop it first")
        engine.start()
    else:
        engine = ComposeEngine.attach(args.dir)
    if args.action in ("start", "env"):
        for key, value in engine.env().items():
            print(f"export {key}={value}")
        print(f"# published ports are in the namespace: nsenter --net={engine.netns_path} ...")
        return 0
    if args.action == "stop":
        for item in engine.stop(projects):
            print(f"removed {item}")
        return 0
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        raise SystemExit("run: name a command")
    return subprocess.call(engine.command(command), env={**os.environ, **engine.env()})


if __name__ == "__main__":
    raise SystemExit(main())
