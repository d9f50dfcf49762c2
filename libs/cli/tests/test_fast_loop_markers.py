"""The README's fast loop, ``scripts/test.sh -m "not scenario"``, leaves out the chaos tests
(the root conftest gives each the ``scenario`` marker)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_not_scenario_leaves_out_every_chaos_test() -> None:
    """One collection of tests/chaos (all of it carries ``chaos``): nothing kept."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "not scenario", "tests/chaos"],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    tail = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"no tests collected \((\d+) deselected\) in .*", tail), done.stdout
    assert int(re.findall(r"\d+", tail)[0]) >= 6  # the six chaos modules' tests
