"""``arcflow sim actions`` as a real process: prints its URLs and PAT, serves, stops cleanly."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

from arcflow.cli.main import cli

pytestmark = pytest.mark.integration

ARCFLOW = [sys.executable, "-c", "from arcflow.cli.main import main; main()"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_until_signal_and_exits_zero(signum: int):
    proc = subprocess.Popen(
        [*ARCFLOW, "sim", "actions", "--port", "0", "--poll-timeout", "1", "--mode", "acquire"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(5)]  # type: ignore[union-attr]
        text = "".join(lines)
        base = re.search(r"listening on (http://127\.0\.0\.1:\d+)", text)
        config = re.search(r"config URL:\s+(\S+)", text)
        pat = re.search(r"PAT \(for this simulator only.*\): (\S+)", text)
        assert base, text
        assert config, text
        assert pat, text
        assert config.group(1) == f"{base.group(1)}/example-org"
        reg = httpx.post(
            f"{base.group(1)}/api/v3/orgs/example-org/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {pat.group(1)}"},
        )
        assert reg.status_code == 201, "the printed PAT works"
        assert httpx.get(f"{base.group(1)}/_sim/health").json()["mode"] == "acquire"
        started = time.monotonic()
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_reports_a_port_in_use():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = CliRunner().invoke(cli, ["sim", "actions", "--port", str(port)])
    assert result.exit_code != 0
    assert f"cannot listen on 127.0.0.1:{port}" in result.output


def test_cli_rejects_a_bad_mode():
    result = CliRunner().invoke(cli, ["sim", "actions", "--mode", "sideways"])
    assert result.exit_code == 2
    assert "sideways" in result.output
