"""The README's fast loop, ``scripts/test.sh -m "not scenario"``, leaves out the chaos tests
(the root conftest gives each the ``scenario`` marker) and ``-m chaos`` still finds them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _collect(expression: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", expression, "tests/chaos"],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    tail = done.stdout.strip().splitlines()[-1]
    selected = re.search(r"(\d+)(?:/\d+)? tests? collected", tail)
    deselected = re.search(r"(\d+) deselected", tail)
    return (
        int(selected.group(1)) if selected else 0,
        int(deselected.group(1)) if deselected else 0,
    )


def test_not_scenario_leaves_out_every_chaos_test() -> None:
    chaos, _ = _collect("chaos")
    assert chaos > 0
    kept, dropped = _collect("not scenario")
    assert (kept, dropped) == (0, chaos)
