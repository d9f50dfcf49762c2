"""Kubernetes label selectors: parse the query-string form, match labels, format a mapping.

Pure functions shared by the client (to build selectors) and the emulator (to evaluate them).
Grammar as the API server accepts it: comma-separated requirements ``k``, ``!k``, ``k=v``,
``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``; ``!=`` and ``notin`` also match objects
without the key, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Operator = Literal["=", "!=", "in", "notin", "exists", "!exists"]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


class LabelSelectorError(ValueError):
    """The selector string does not parse; the message says which part."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin": true when absent, as the API server does.
        return not present or labels[self.key] not in self.values


def _split_top_level(selector: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise LabelSelectorError(f"unbalanced ')' in label selector {selector!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise LabelSelectorError(f"unbalanced '(' in label selector {selector!r}")
    parts.append("".join(current))
    return parts


def parse_label_selector(selector: str | None) -> tuple[Requirement, ...]:
    """Parse a selector string; the empty selector matches everything."""
    if selector is None or not selector.strip():
        return ()
    requirements: list[Requirement] = []
    for part in _split_top_level(selector):
        if not part.strip():
            raise LabelSelectorError(f"empty requirement in label selector {selector!r}")
        if match := _SET_RE.match(part):
            key, op, raw_values = match.groups()
            values = tuple(v.strip() for v in raw_values.split(",")) if raw_values.strip() else ()
            if not values:
                raise LabelSelectorError(f"{op!r} needs at least one value in {part.strip()!r}")
            for value in values:
                if not _VALUE_RE.match(value):
                    raise LabelSelectorError(f"invalid label value {value!r} in {part.strip()!r}")
            requirements.append(Requirement(key, "in" if op == "in" else "notin", values))
        elif match := _EQ_RE.match(part):
            key, op, value = match.groups()
            requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
        elif match := _EXISTS_RE.match(part):
            bang, key = match.groups()
            requirements.append(Requirement(key, "!exists" if bang else "exists"))
        else:
            raise LabelSelectorError(f"cannot parse requirement {part.strip()!r}")
    return tuple(requirements)


def selector_matches(requirements: Sequence[Requirement], labels: Mapping[str, str] | None) -> bool:
    """True when every requirement holds for ``labels``."""
    present = labels or {}
    return all(req.matches(present) for req in requirements)


def format_label_selector(labels: Mapping[str, str]) -> str:
    """``{"a": "1", "b": "2"}`` -> ``"a=1,b=2"`` (equality requirements, sorted for stability)."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
