"""FastStream by its public API only (issue #21, ADR 0070).

Anywhere in the repository (sources, tests, benchmarks, scripts): no import of a private
FastStream module (``faststream._internal`` or any ``_``-prefixed module or name), no class
that subclasses a FastStream class, no class swap of an object (``obj.__class__ = ...``).
In the service skeleton: the services' subscriptions have no fetch loop of their own
(FastStream's pull loop fetches); the listener, which consumes nothing since ADR 0104, needs
none either.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = {".venv", ".cache", "node_modules", ".git", "build", "dist", ".mypy_cache", "tools"}
SKELETON = REPO / "libs/common/src/arcflow/common/service"


def python_files() -> Iterator[Path]:
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
        yield from (Path(root) / f for f in sorted(files) if f.endswith(".py"))


def _faststream_module(module: str) -> bool:
    return module.split(".")[0] == "faststream"


def private_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` of every import of a private FastStream module or name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if _faststream_module(alias.name) and any(p.startswith("_") for p in parts):
                    found.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and _faststream_module(node.module or ""):
            module = node.module or ""
            if any(p.startswith("_") for p in module.split(".")):
                found.append((node.lineno, module))
            found += [
                (node.lineno, f"{module}.{a.name}") for a in node.names if a.name.startswith("_")
            ]
    return found


def faststream_names(tree: ast.AST) -> set[str]:
    """Names bound to FastStream modules or objects by the module's imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {
                (a.asname or a.name).split(".")[0] for a in node.names if _faststream_module(a.name)
            }
        elif isinstance(node, ast.ImportFrom) and _faststream_module(node.module or ""):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def subclasses_and_swaps(tree: ast.AST) -> list[tuple[int, str]]:
    """Classes derived from a FastStream name, and any assignment to ``__class__``."""
    imported = faststream_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if _root_name(base) in imported:
                    found.append((node.lineno, f"class {node.name}({ast.unparse(base)})"))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "__class__":
                    found.append((node.lineno, f"{ast.unparse(target)} = ..."))
    return found


def fetch_calls(tree: ast.AST) -> list[int]:
    """Lines of JetStream fetches and pull subscriptions (``x.fetch(...)``,
    ``x.pull_subscribe(...)``, ``x.pull_subscribe_bind(...)``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("fetch", "pull_subscribe", "pull_subscribe_bind")
    ]


def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def test_the_checks_see_each_kind() -> None:
    tree = ast.parse(
        "import faststream._internal.utils\n"
        "from faststream._internal.endpoint import x\n"
        "from faststream.nats import _hidden, NatsBroker\n"
        "from faststream.nats.subscriber.usecases import PullStreamSubscriber as P\n"
        "import faststream\n"
        "class A(P): ...\n"
        "class B(faststream.BaseMiddleware): ...\n"
        "class C(NatsBroker[int]): ...\n"
        "class D(dict): ...\n"
        "obj.__class__ = A\n"
        "async def f(sub): await sub.fetch(1)\n"
    )
    assert [w for _, w in private_imports(tree)] == [
        "faststream._internal.utils",
        "faststream._internal.endpoint",
        "faststream.nats._hidden",
    ]
    assert [w for _, w in subclasses_and_swaps(tree)] == [
        "class A(P)",
        "class B(faststream.BaseMiddleware)",
        "class C(NatsBroker[int])",
        "obj.__class__ = ...",
    ]
    assert fetch_calls(tree) == [11]


def test_no_private_faststream_import_subclass_or_class_swap_anywhere() -> None:
    offenders = []
    files = list(python_files())
    assert len(files) > 200  # the whole repository, not an empty glob
    for path in files:
        tree = _parse(path)
        where = path.relative_to(REPO)
        offenders += [f"{where}:{line}: imports {what}" for line, what in private_imports(tree)]
        offenders += [f"{where}:{line}: {what}" for line, what in subclasses_and_swaps(tree)]
    assert offenders == []


def test_the_services_subscriptions_have_no_fetch_loop_of_their_own() -> None:
    """FastStream's pull loop fetches for every subscription: the skeleton has no fetch loop."""
    fetching = sorted(p.name for p in SKELETON.rglob("*.py") if fetch_calls(_parse(p)))
    assert fetching == []
