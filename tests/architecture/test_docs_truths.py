"""The front page tells the truth: every doc is listed, and every figure in README's Measured
table is written in the document its row links to (the figures are measured there, with the
command and the machine's load; the README only quotes them)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_readme_lists_every_doc() -> None:
    docs = _section(README, "Docs")
    missing = [
        p.relative_to(REPO).as_posix()
        for p in sorted((REPO / "docs").glob("*.md"))
        if p.relative_to(REPO).as_posix() not in docs
    ]
    assert not missing, f"README's Docs section does not list {missing}"


def test_benchmark_index_lists_every_result() -> None:
    index = (REPO / "docs/benchmarks/README.md").read_text()
    missing = [
        p.name
        for p in sorted((REPO / "docs/benchmarks").glob("*.md"))
        if p.name != "README.md" and f"({p.name})" not in index
    ]
    assert not missing, f"docs/benchmarks/README.md does not link {missing}"


def _measured_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in _section(README, "Measured").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 3 or cells[0] == "what":
            continue
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_every_measured_figure_is_in_the_doc_it_links() -> None:
    rows = _measured_rows()
    assert len(rows) >= 10, "README's Measured table was not found"
    wrong = []
    for what, figure, where in rows:
        link = re.search(r"\]\(([^)#]+)", where)
        if link is None:
            wrong.append(f"{what!r}: no link to the document that measured it")
            continue
        doc = (REPO / link.group(1)).read_text()
        numbers = re.findall(r"\d[\d,.]*\d|\d", figure)
        absent = [n for n in numbers if n not in doc]
        if absent:
            wrong.append(f"{what!r}: {absent} not in {link.group(1)}")
    assert not wrong, "README figures not found where they link:\n" + "\n".join(wrong)
