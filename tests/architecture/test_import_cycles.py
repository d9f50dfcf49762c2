"""No import cycles anywhere in arcflow (issue 13): the import graph, as import-linter builds it
with grimp (``TYPE_CHECKING`` imports included), has no strongly connected component."""

from __future__ import annotations

import grimp

from tests.architecture.cycles import import_cycles

#: Cycles inside the listener, which moves onto the skeleton with its own work (issue 13 item 3):
#: ``standby`` types its ``Listener`` and ``ScaleSetUnit`` parameters from ``app``, which
#: imports ``run_standby``. Named here so that any other cycle fails.
LISTENER_CYCLES = [["arcflow.listener.app", "arcflow.listener.standby"]]


def test_arcflow_has_no_import_cycles() -> None:
    graph = grimp.build_graph("arcflow", cache_dir=None)
    assert len(graph.modules) > 100  # every workspace package was found
    assert [c for c in import_cycles(graph) if c not in LISTENER_CYCLES] == []


def test_a_cycle_is_found_and_named() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("p.server", "p.routes"), ("p.routes", "p.server"), ("p.a", "p.b")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [["p.routes", "p.server"]]
