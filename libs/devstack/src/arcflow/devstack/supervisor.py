"""The dev stack's service processes, supervised as a Deployment's pods would be.

A service (``python -m arcflow.<name>``) that exits while the stack runs is started again after
a back-off that doubles with each quick failure (1 s, 2 s, 4 s ... at most 30 s) and resets once
a run lasted :attr:`Backoff.reset_after` seconds, much like a kubelet's crash-loop back-off (see
docs/adrs/0018-dev-stack-supervises-services.md). Restarts are counted for the view and the
summary. A service that keeps exiting before it ever answered its health check is reported as a
crash loop: the demo cannot complete, but restarts go on, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from arcflow.devstack.child_process import last_log_line, set_parent_death_signal, terminate

HEALTH_WAIT_SECONDS = 20.0
STOP_GRACE_SECONDS = 10.0
#: Consecutive quick failures without a healthy answer that make a crash loop.
CRASH_LOOP_AFTER = 3
#: Status prefixes that mean the service cannot do its job (the demo is blocked).
DOWN_PREFIXES: tuple[str, ...] = ("missing", "exited", "crash loop")


@dataclass(frozen=True)
class Backoff:
    """Delay before restart ``n`` (1-based) of a run of quick failures."""

    initial: float = 1.0
    factor: float = 2.0
    maximum: float = 30.0
    #: A run at least this long counts as a success: the next failure starts over at ``initial``.
    reset_after: float = 60.0

    def delay(self, consecutive_failures: int) -> float:
        exponent = max(0, consecutive_failures - 1)
        return float(min(self.maximum, self.initial * self.factor**exponent))


def module_available(module: str) -> bool:
    """True when ``python -m <module>`` can run (the package and its ``__main__`` exist)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def service_env(
    name: str,
    *,
    nats_url: str,
    kubeconfig: str | None,
    health_port: int,
    metrics_port: int,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment of one service subprocess: shared NATS/Kubernetes settings plus private
    health/metrics ports (the defaults 8080/8081 would collide between services)."""
    env = dict(os.environ if base is None else base)
    prefix = f"ARCFLOW_{name.upper()}_"
    env.update(
        {
            "ARCFLOW_NATS_URL": nats_url,
            f"{prefix}HEALTH_HOST": "127.0.0.1",
            f"{prefix}HEALTH_PORT": str(health_port),
            f"{prefix}METRICS_HOST": "127.0.0.1",
            f"{prefix}METRICS_PORT": str(metrics_port),
            f"{prefix}LOG_JSON": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if name == "reconciler":
        # Listener pods reach the same server; the dev stack's NATS has no authorization, so
        # no credentials Secret is wired.
        env[f"{prefix}LISTENER_NATS_URL"] = nats_url
    if kubeconfig:
        env["ARCFLOW_KUBE_KUBECONFIG"] = kubeconfig
    return env


def exit_text(code: int | None) -> str:
    """``exit 1``, ``killed by SIGKILL``: how a process ended."""
    if code is None:
        return "running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit {code}"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (our own port)
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _restarts_suffix(restarts: int) -> str:
    if not restarts:
        return ""
    return f", {restarts} restart" + ("s" if restarts != 1 else "")


@dataclass
class ServiceProcess:
    """One supervised service; ``status`` is what the view and the summary show."""

    name: str
    log_path: Path
    health_port: int
    metrics_port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None
    status: str = "starting"
    restarts: int = 0
    consecutive_failures: int = 0
    #: The current (or last) run answered its health check.
    healthy: bool = False
    last_exit: int | None = None
    started_at: float = 0.0
    #: ``python -m`` target; default ``arcflow.<name>``.
    module_name: str | None = None
    #: Interpreter arguments before ``-m`` (e.g. ``-m cProfile -o FILE`` for a benchmark).
    python_args: tuple[str, ...] = ()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def module(self) -> str:
        return self.module_name or f"arcflow.{self.name}"


class Supervisor:
    """Starts one service, waits for its health, and restarts it whenever it exits until
    :meth:`stop`. ``on_status`` is called with every status change."""

    def __init__(
        self,
        service: ServiceProcess,
        *,
        on_status: Callable[[ServiceProcess], None],
        backoff: Backoff | None = None,
        health_wait: float = HEALTH_WAIT_SECONDS,
    ) -> None:
        self.service = service
        self.backoff = backoff or Backoff()
        self._on_status = on_status
        self._health_wait = health_wait
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _set(self, status: str) -> None:
        self.service.status = status
        self._on_status(self.service)

    async def start(self) -> None:
        """Launch and wait for the first health answer (or exit, or the health deadline);
        supervision then goes on in the background."""
        # An arcflow service must be installed; a custom module_name (tests) is not checked.
        if self.service.module_name is None and not module_available(
            f"{self.service.module}.__main__"
        ):
            self._set(f"missing: {self.service.module} has no __main__ (not built yet?)")
            return
        await self._launch()
        self._task = asyncio.create_task(self._supervise(), name=f"supervise-{self.service.name}")

    async def _launch(self) -> None:
        service = self.service
        with service.log_path.open("ab") as log_file:
            service.process = await asyncio.create_subprocess_exec(
                sys.executable,
                *service.python_args,
                "-m",
                service.module,
                env=service.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=set_parent_death_signal if sys.platform == "linux" else None,
            )
        service.started_at = time.monotonic()
        service.healthy = False
        self._set("starting" + _restarts_suffix(service.restarts))
        await self._wait_healthy()

    async def _wait_healthy(self) -> None:
        """Probe until the run answers, it ends, or the stack stops. Past the first deadline
        the status says "no health answer" and the probe goes on (every second), as a
        kubelet's does: a run that starts slowly on a loaded machine turns healthy when it
        answers. Only :meth:`start` returns at that deadline; a restart (awaited inside
        :meth:`_supervise`, whose next step is waiting for the run to end) keeps probing."""
        service = self.service
        assert service.process is not None
        pid = service.process.pid
        health = f"http://127.0.0.1:{service.health_port}/healthz"
        deadline = time.monotonic() + self._health_wait
        said_no_answer = False
        while service.alive and not self._stopping.is_set():
            if await asyncio.to_thread(_http_ok, health):
                service.healthy = True
                self._set(f"running (pid {pid}, healthy{_restarts_suffix(service.restarts)})")
                return
            if time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                continue
            if not said_no_answer:
                said_no_answer = True
                restarts = _restarts_suffix(service.restarts)
                self._set(f"running (pid {pid}, no health answer{restarts})")
            if self._task is None:  # start(): supervision takes over from here
                return
            await asyncio.sleep(1.0)

    async def _supervise(self) -> None:
        service = self.service
        while True:
            assert service.process is not None
            if not service.healthy:  # a first run that had not answered by start()'s deadline
                await self._wait_healthy()
            code = await service.process.wait()
            service.last_exit = code
            ended = exit_text(code)
            last = last_log_line(service.log_path)
            detail = f"{ended}: {last}" if last else ended
            if self._stopping.is_set():
                return
            ran = time.monotonic() - service.started_at
            quick = ran < self.backoff.reset_after
            service.consecutive_failures = service.consecutive_failures + 1 if quick else 1
            delay = self.backoff.delay(service.consecutive_failures)
            crash_loop = service.consecutive_failures >= CRASH_LOOP_AFTER and not service.healthy
            prefix = "crash loop" if crash_loop else "restarting"
            self._set(f"{prefix} in {delay:.0f}s ({detail}{_restarts_suffix(service.restarts)})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return
            service.restarts += 1
            await self._launch()

    async def stop(self) -> None:
        """No more restarts; SIGTERM the process, SIGKILL after a grace period. Safe to call
        twice."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:  # no launch can be under way once it is gone
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        process = self.service.process
        if process is None:
            return
        await terminate(process, STOP_GRACE_SECONDS)
        # Not "exited": a service the stack stopped did not fail.
        self._set(f"stopped ({exit_text(process.returncode)})")


__all__ = [
    "CRASH_LOOP_AFTER",
    "DOWN_PREFIXES",
    "Backoff",
    "ServiceProcess",
    "Supervisor",
    "exit_text",
    "module_available",
    "service_env",
]
