"""No import cycles anywhere in arcflow (issue 13): the import graph, as import-linter builds it
with grimp (``TYPE_CHECKING`` imports included), has no strongly connected component."""

from __future__ import annotations

import grimp

from tests.architecture.cycles import import_cycles


def test_arcflow_has_no_import_cycles() -> None:
    graph = grimp.build_graph("arcflow", cache_dir=None)
    assert len(graph.modules) > 100  # every workspace package was found
    assert import_cycles(graph) == []


def test_a_cycle_is_found_and_named() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("p.server", "p.routes"), ("p.routes", "p.server"), ("p.a", "p.b")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [["p.routes", "p.server"]]
