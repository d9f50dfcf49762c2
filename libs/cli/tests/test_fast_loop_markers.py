"""The README's loops select by marker: ``scripts/test.sh -m "not integration"`` (the fast loop)
leaves out every chaos, scenario and real-server test, and ``-m "not scenario"`` leaves out the
chaos tests (the root conftest gives the markers).

``-m`` keeps a test exactly when the expression holds over the names of its markers, so the
checks read each test's marker names as the root conftest left them (``tests/markers.py``).
In the suite this session has collected the whole repository already and the names are read
from it; run alone, one child ``pytest --collect-only`` of the folders below records them
(collecting the repository again cost the suite 50-120 s of a worker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.markers import COLLECTED_MARKERS

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
FOLDERS = sorted({*SERVER_ONLY, *UNIT})

#: The child: every test of the folders with its marker names, recorded after the root
#: conftest gave them (no ``-m``: nothing deselected), as one JSON object.
CHILD = """
import contextlib, io, json, sys
import pytest
from tests.markers import marker_names

class Recorder:
    found = {}
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        Recorder.found = {k: sorted(v) for k, v in marker_names(items).items()}

with contextlib.redirect_stdout(io.StringIO()):
    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]],
                plugins=[Recorder()])
sys.__stdout__.write(json.dumps(Recorder.found))
"""


def _under(nodeid: str, folders: list[str]) -> bool:
    return any(nodeid.startswith(folder + "/") for folder in folders)


@pytest.fixture(scope="module")
def markers(pytestconfig: pytest.Config) -> dict[str, frozenset[str]]:
    """nodeid -> marker names of every test in ``FOLDERS``."""
    seen = pytestconfig.stash.get(COLLECTED_MARKERS, {})
    if all(any(_under(nodeid, [folder]) for nodeid in seen) for folder in FOLDERS):
        return {nodeid: names for nodeid, names in seen.items() if _under(nodeid, FOLDERS)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *FOLDERS],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {nodeid: frozenset(names) for nodeid, names in found.items()}


def test_the_fast_loop_leaves_out_every_server_chaos_and_scenario_test(
    markers: dict[str, frozenset[str]],
) -> None:
    on_server = {n: names for n, names in markers.items() if _under(n, SERVER_ONLY)}
    assert len(on_server) >= 100, sorted(on_server)
    kept = sorted(n for n, names in on_server.items() if "integration" not in names)
    assert not kept, f'-m "not integration" would run these: {kept}'


def test_not_scenario_leaves_out_every_chaos_test(markers: dict[str, frozenset[str]]) -> None:
    chaos = {n: names for n, names in markers.items() if _under(n, ["tests/chaos"])}
    assert len(chaos) >= 6, sorted(chaos)
    kept = sorted(n for n, names in chaos.items() if "scenario" not in names)
    assert not kept, f'-m "not scenario" would run these: {kept}'


def test_the_fast_loop_keeps_the_unit_tests(markers: dict[str, frozenset[str]]) -> None:
    kept = {n for n, names in markers.items() if _under(n, UNIT) and "integration" not in names}
    gate = "services/reconciler/tests/unit/test_ars_rules.py::test_version_gate["
    assert any(nodeid.startswith(gate) for nodeid in kept), sorted(kept)[:20]
    assert len(kept) >= 100, len(kept)
