"""The simulator against upstream's own client: ``scripts/peers.sh`` builds the conformance
program of ``compat/scaleset`` (``github.com/actions/scaleset``, the library ARC uses for every
call to the Actions service), starts a direct-mode and an acquire-mode simulator on loopback,
and runs every step against them (docs/actions-simulator.md#conformance-with-upstreams-client).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "peers.sh"
# A first build downloads the library and compiles it (under a minute on 2 cores); the steps
# themselves take well under a minute.
RUN_TIMEOUT = 270.0
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")


@pytest.mark.timeout(RUN_TIMEOUT + 20)
def test_upstream_scaleset_client_passes_every_step() -> None:
    if shutil.which("go") is None:
        pytest.fail(
            "Go is not installed: upstream's scaleset client is a Go library. Install Go 1.26 "
            "(https://go.dev/doc/install, or scripts/install-tools.sh) and put `go` on PATH."
        )
    env = {**os.environ, "ARCFLOW_BIN": str(Path(sys.executable).parent / "arcflow")}
    try:
        done = subprocess.run(
            [str(SCRIPT)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"scripts/peers.sh did not finish within {RUN_TIMEOUT:.0f} s:\n{out}")
    report = done.stdout + done.stderr
    lines = done.stdout.splitlines()
    summary = SUMMARY.match(lines[-1]) if lines else None
    assert summary is not None, f"no 'N passed, N failed' line (exit {done.returncode}):\n{report}"
    passed, failed = int(summary[1]), int(summary[2])
    failures = [line for line in lines if line.startswith("FAIL ")]
    if failed or done.returncode != 0:
        pytest.fail(
            f"{failed} step(s) failed (exit {done.returncode}):\n"
            + "\n".join(failures)
            + f"\n\nfull output:\n{report}"
        )
    assert passed == sum(line.startswith("PASS ") for line in lines), report
    assert passed >= 60, f"only {passed} steps ran:\n{report}"
    # No secret in the report: the PATs, App keys and JIT configs stay inside the program.
    assert "ghp_" not in report, "a PAT was printed"
    assert "PRIVATE KEY" not in report, "an App key was printed"
