"""Reading manifests for the offline commands: files or ``-`` (standard input), several YAML
documents each, ``kind: List`` read as its items; YAML errors name the file and line."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

STDIN = "-"


class InputError(click.ClickException):
    """Bad input file or option: printed as ``Error: ...`` and exit code 1."""


@dataclass(frozen=True)
class Document:
    """One manifest and where it came from (``source`` and its index there)."""

    source: str
    index: int
    body: Any

    def where(self, *, with_source: bool, with_index: bool) -> str:
        parts = []
        if with_source:
            parts.append("<stdin>" if self.source == STDIN else self.source)
        if with_index:
            parts.append(f"[document {self.index}]")
        return " ".join(parts)


def read_text(name: str) -> str:
    if name == STDIN:
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: cannot read file: {exc}") from exc


def parse_documents(name: str, text: str) -> list[Any]:
    """Non-empty documents of ``text``; a ``kind: List`` contributes its ``items``."""
    try:
        raw = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = exc.problem or exc.context or "cannot parse"
        raise InputError(f"{where}: not valid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{name}: not valid YAML: {exc}") from exc
    documents: list[Any] = []
    for doc in raw:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            documents.extend(item for item in doc.get("items") or [] if item is not None)
        else:
            documents.append(doc)
    return documents


def load(names: tuple[str, ...] | list[str]) -> list[Document]:
    """Every document of every input, in order. An input without any document is an error."""
    documents: list[Document] = []
    for name in names:
        docs = parse_documents(name, read_text(name))
        if not docs:
            shown = "standard input" if name == STDIN else name
            raise InputError(f"{shown}: contains no YAML document")
        documents.extend(Document(name, i, d) for i, d in enumerate(docs))
    return documents


__all__ = ["STDIN", "Document", "InputError", "load", "parse_documents", "read_text"]
