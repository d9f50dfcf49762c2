"""Issue 32, item 4: the reconciler's and registrar's functions take and return typed models;
a document-typed signature (a parameter or return annotated ``Manifest``, ``dict[str, Any]``,
``Mapping[str, Any]`` or a bare ``dict``) stays only at the wire edge, and the count only goes
down.

The edges that remain, by module: the reads that return what the cache or the API server holds
and the writer that sends what a builder made (``audit.py``, ``ars_reads.py``, the adapters'
reads and ``on_unparsable``, ``lookup.py``, the runner's Pod and JIT Secret read in
``runner.py``, a Secret we made in ``runner_set.py``); the routes a changed document or the
stage clock sees (``routing.py``, ``stages.py``); a builder's desired object compared with the
live one and the wire form of merge patches (``ars_children.py``, ``listener.py``, and
``runner_set.py``'s runners built from the set's manifest and the live runner spec its
integrity hash is over; the reasons are per parameter in ``test_reconcile_shape.EXPLAINED``);
the manifest accessors; the conditions of an ARS that may not parse and the wire form of a
conditions patch (``conditions.py``); ``ars_rules.variant_of`` for a built set; the desired
runner sets a builder made, kept per ARS version for the comparison (``ars_plan.py``); the
registrar's parse of an ARS as read (``planning.registration_of`` for a converge,
``planning.ars_of`` for an RPC's Actions client). A set's runners, listed on every pass, are
read through ``runner_set_rules.SetRunner``, a typed view of the cache's documents (parsing
them would cost more than the pass); a runner's status writes are ``EphemeralRunnerStatus``
models, sent as the fields they set.

Lower a ceiling when a change types a signature; a module not named here has none.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {
    "reconciler": REPO / "services/reconciler/src/arcflow/reconciler",
    "registrar": REPO / "services/registrar/src/arcflow/registrar",
}
_DOCUMENT = re.compile(r"\bManifest\b|dict\[str, Any\]|Mapping\[str, Any\]|\bdict\b(?!\[)")

#: Document-typed signatures per module (103 in all before issue 32's refactor, 105 after it:
#: the routes the declared controllers name take the changed document, as the hand-written
#: routing did in one function; item 4 then typed the registrar, 13 -> 8, the reconciler's
#: condition, capacity, quota, schedule and loop-guard rules, 92 -> 75, and its runner and
#: runner-set rules with their callers, 75 -> 61).
CEILINGS: dict[str, int] = {
    "reconciler/audit.py": 6,
    "reconciler/controllers/adapter.py": 3,
    "reconciler/controllers/ars_children.py": 8,
    "reconciler/controllers/ars_plan.py": 1,
    "reconciler/controllers/ars_rules.py": 1,
    "reconciler/controllers/ars_spec.py": 4,
    "reconciler/controllers/base.py": 4,
    "reconciler/controllers/conditions.py": 3,
    "reconciler/controllers/jit_failures.py": 1,
    "reconciler/controllers/listener.py": 7,
    "reconciler/controllers/manifest.py": 8,
    "reconciler/controllers/orphans.py": 1,
    "reconciler/controllers/runner.py": 1,
    "reconciler/controllers/runner_set.py": 4,
    "reconciler/routing.py": 4,
    "reconciler/stages.py": 6,
    "registrar/ars_reads.py": 3,
    "registrar/controller.py": 2,
    "registrar/lookup.py": 1,
    "registrar/planning.py": 2,
}


def document_typed() -> dict[str, int]:
    counts: dict[str, int] = {}
    for service, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            name = f"{service}/{path.relative_to(root).as_posix()}"
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                args = node.args
                notes = [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
                notes.append(node.returns)
                if any(n is not None and _DOCUMENT.search(ast.unparse(n)) for n in notes):
                    counts[name] = counts.get(name, 0) + 1
    return counts


def test_document_typed_signatures_only_go_down() -> None:
    counts = document_typed()
    over = {k: (v, CEILINGS.get(k, 0)) for k, v in counts.items() if v > CEILINGS.get(k, 0)}
    assert not over, (
        f"more document-typed signatures than allowed (count, ceiling): {over}; take or return "
        "the model (arcflow.common.models), or say in this file why it is a wire edge"
    )


def test_the_ceilings_are_the_counts() -> None:
    """A ceiling above its count is lowered (the count never comes back up)."""
    counts = document_typed()
    loose = {k: (counts.get(k, 0), v) for k, v in CEILINGS.items() if counts.get(k, 0) < v}
    assert not loose, f"lower these ceilings to their counts (count, ceiling): {loose}"
