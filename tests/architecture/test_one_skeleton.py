"""Issue 13 "Done when": no JetStream fetch loop, ``nats.connect`` or signal handling exists
outside ``arcflow.common.service`` (ADR 0034). Tests and benchmarks may connect directly.

The listener consumes nothing (ADR 0104): its pump decides each batch it stored itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = [*REPO.glob("libs/*/src"), *REPO.glob("services/*/src")]
SKELETON = REPO / "libs/common/src/arcflow/common/service"


def _calls(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, dotted callee)`` of every call whose callee is an attribute: ``nats.connect``,
    ``sub.fetch``, ``loop.add_signal_handler``..."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else "?"
            found.append((node.lineno, f"{name}.{node.func.attr}"))
    return sorted(found)


def _imports_nats(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "nats" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nats":
            return True
    return False


def what_is_forbidden(callee: str, uses_nats: bool) -> str | None:
    attr = callee.split(".")[1]
    if callee == "nats.connect":
        return "its own NATS connection"
    if attr in ("pull_subscribe", "pull_subscribe_bind") or (attr == "fetch" and uses_nats):
        return "a JetStream fetch loop"
    if attr == "add_signal_handler" or callee == "signal.signal":
        return "signal handling"
    return None


def offenders() -> list[str]:
    found = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if path.is_relative_to(SKELETON):
                continue
            tree = ast.parse(path.read_text(), str(path))
            uses_nats = _imports_nats(tree)
            for line, callee in _calls(tree):
                what = what_is_forbidden(callee, uses_nats)
                if what is not None:
                    found.append(f"{path.relative_to(REPO)}:{line}: {callee} ({what})")
    return sorted(found)


def test_the_check_sees_each_kind() -> None:
    source = (
        "import nats, signal\n"
        "async def f(loop, js):\n"
        "    nc = await nats.connect('x')\n"
        "    sub = await js.pull_subscribe('s', 'd')\n"
        "    await sub.fetch(1)\n"
        "    loop.add_signal_handler(1, print)\n"
        "    signal.signal(1, print)\n"
    )
    tree = ast.parse(source)
    kinds = [what_is_forbidden(c, _imports_nats(tree)) for _, c in _calls(tree)]
    assert [k for k in kinds if k] == [
        "its own NATS connection",
        "a JetStream fetch loop",
        "a JetStream fetch loop",
        "signal handling",
        "signal handling",
    ]


def test_connections_fetch_loops_and_signals_live_in_the_service_skeleton() -> None:
    assert len(SOURCES) >= 7
    assert offenders() == []
