"""The dev stack's supervisor with real processes: SIGKILL, crash loops, back-off, stop."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from arcflow.devstack.nats_server import free_port
from arcflow.devstack.supervisor import (
    CRASH_LOOP_AFTER,
    Backoff,
    ServiceProcess,
    Supervisor,
    exit_text,
)
from tests.polling import eventually

HEALTHY = """
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""
CRASHY = "import sys\nprint('bad config: no NATS URL', flush=True)\nsys.exit(2)\n"


def _service(tmp_path: Path, module: str, source: str) -> ServiceProcess:
    (tmp_path / f"{module}.py").write_text(source)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PORT=str(port))
    return ServiceProcess("svc", tmp_path / f"{module}.log", port, env=env, module_name=module)


def test_backoff_doubles_up_to_its_maximum() -> None:
    backoff = Backoff(initial=1.0, factor=2.0, maximum=30.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 4, 8, 16, 30, 30]


def test_exit_text_names_the_signal() -> None:
    assert exit_text(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_text(3) == "exit 3"


async def test_a_sigkilled_service_is_restarted(tmp_path: Path) -> None:
    service = _service(tmp_path, "healthy_service", HEALTHY)
    statuses: list[str] = []
    supervisor = Supervisor(
        service,
        on_status=lambda s: statuses.append(s.status),
        backoff=Backoff(initial=0.1, maximum=0.5),
    )
    await supervisor.start()
    try:
        assert service.process is not None
        first_pid = service.process.pid
        assert service.status == f"running (pid {first_pid}, healthy)"
        os.kill(first_pid, signal.SIGKILL)

        async def restarted() -> bool:
            return service.restarts == 1 and service.status.endswith("healthy, 1 restart)")

        await eventually(restarted, within=20, what="a healthy restart")
        assert service.process.pid != first_pid
        assert any(s.startswith("restarting in 0s (killed by SIGKILL") for s in statuses)
    finally:
        await supervisor.stop()
    assert service.status == "stopped (killed by SIGTERM)"
    assert not service.alive


async def test_a_service_that_never_comes_up_is_a_crash_loop(tmp_path: Path) -> None:
    service = _service(tmp_path, "crashy_service", CRASHY)
    supervisor = Supervisor(
        service, on_status=lambda s: None, backoff=Backoff(initial=0.05, maximum=0.2)
    )
    await supervisor.start()
    try:

        async def looping() -> bool:
            return service.status.startswith("crash loop")

        await eventually(looping, within=30, what="a crash loop")
        assert service.restarts >= CRASH_LOOP_AFTER - 1
        assert "exit 2: bad config: no NATS URL" in service.status
    finally:
        await supervisor.stop()
    restarts = service.restarts
    assert not service.alive
    assert service.status.startswith("stopped")
    # Stopped means stopped: no restart after stop().
    assert service.restarts == restarts


async def test_a_missing_service_is_reported_not_started(tmp_path: Path) -> None:
    service = ServiceProcess("no_such_service", tmp_path / "x.log", free_port())
    await Supervisor(service, on_status=lambda s: None).start()
    assert service.status.startswith("missing: arcflow.no_such_service has no __main__")
    assert service.process is None


SLOW_TO_ANSWER = "import time\ntime.sleep(1.5)\n" + HEALTHY


async def test_a_service_that_answers_after_the_health_deadline_turns_healthy(
    tmp_path: Path,
) -> None:
    """The probe goes on after its first deadline, as a kubelet's does: a service that starts
    slowly (a loaded machine) is shown healthy once it answers, not 'no health answer' for good."""
    service = _service(tmp_path, "slow_service", SLOW_TO_ANSWER)
    supervisor = Supervisor(service, on_status=lambda s: None, health_wait=0.3)
    await supervisor.start()
    try:
        assert service.process is not None
        pid = service.process.pid
        assert service.status == f"running (pid {pid}, no health answer)"

        async def answered() -> bool:
            assert service.status == f"running (pid {pid}, healthy)", service.status
            return True

        await eventually(answered, within=20, what="the slow service shown healthy")
        assert service.healthy
    finally:
        await supervisor.stop()
    assert service.status == "stopped (killed by SIGTERM)"
