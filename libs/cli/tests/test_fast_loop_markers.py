"""The README's loops select by marker: ``scripts/test.sh -m "not integration"`` (the fast loop)
leaves out every chaos, scenario and real-server test, and ``-m "not scenario"`` leaves out the
chaos tests (the root conftest gives the markers)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

#: Folders that hold only tests on real servers or whole stacks.
SERVER_ONLY = [
    "tests/chaos",
    "tests/scenario",
    "services/reconciler/tests/reconciler_integration",
    "services/registrar/tests/registrar_integration",
    "services/listener/tests/listener_integration",
    "services/watcher/tests/integration",
]


def _collect(marker: str, *paths: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker, *paths],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip
    return done.stdout


def _deselected_only(stdout: str) -> int:
    tail = stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"no tests collected \((\d+) deselected\) in .*", tail), stdout
    return int(re.findall(r"\d+", tail)[0])


def test_the_fast_loop_leaves_out_every_server_chaos_and_scenario_test() -> None:
    assert _deselected_only(_collect("not integration", *SERVER_ONLY)) >= 100


def test_not_scenario_leaves_out_every_chaos_test() -> None:
    assert _deselected_only(_collect("not scenario", "tests/chaos")) >= 6


def test_the_fast_loop_keeps_the_unit_tests() -> None:
    kept = _collect("not integration", "services/reconciler/tests/unit", "libs/common/tests/unit")
    assert re.search(r"^(\d+)(/\d+)? tests? collected", kept.strip().splitlines()[-1]), kept
    assert "test_ars_rules.py::test_version_gate" in kept
