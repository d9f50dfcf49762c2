"""The README's loops select by marker: ``scripts/test.sh -m "not integration"`` (the fast loop)
leaves out every chaos, scenario and real-server test, and ``-m "not scenario"`` leaves out the
chaos tests (the root conftest gives the markers).

The three selections are pytest's own ``--collect-only -m`` runs, made by ``pytest.main`` one
after the other in one child interpreter: pytest's start-up (its plugins, the root conftest) is
paid once instead of three times (74 s -> 49 s for the file at load 4 on 2 cores)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
UNIT = ["services/reconciler/tests/unit", "libs/common/tests/unit"]

#: name -> (marker expression, paths)
SELECTIONS = {
    "fast_on_server_only": ("not integration", SERVER_ONLY),
    "middle_on_chaos": ("not scenario", ["tests/chaos"]),
    "fast_on_unit": ("not integration", UNIT),
}

#: The child: each selection's ``--collect-only -q`` output, captured, as one JSON object.
CHILD = """
import contextlib, io, json, sys
import pytest
out = {}
for name, (marker, paths) in json.loads(sys.argv[1]).items():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker, *paths])
    out[name] = buffer.getvalue()
sys.__stdout__.write(json.dumps(out))
"""


@pytest.fixture(scope="module")
def collected() -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(SELECTIONS)],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _deselected_only(stdout: str) -> int:
    tail = stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"no tests collected \((\d+) deselected\) in .*", tail), stdout
    return int(re.findall(r"\d+", tail)[0])


def test_the_fast_loop_leaves_out_every_server_chaos_and_scenario_test(
    collected: dict[str, str],
) -> None:
    assert _deselected_only(collected["fast_on_server_only"]) >= 100


def test_not_scenario_leaves_out_every_chaos_test(collected: dict[str, str]) -> None:
    assert _deselected_only(collected["middle_on_chaos"]) >= 6


def test_the_fast_loop_keeps_the_unit_tests(collected: dict[str, str]) -> None:
    kept = collected["fast_on_unit"]
    assert re.search(r"^(\d+)(/\d+)? tests? collected", kept.strip().splitlines()[-1]), kept
    assert "test_ars_rules.py::test_version_gate" in kept
