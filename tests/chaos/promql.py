"""Which metric and label names a dashboard or rule expression uses that no series carries
(ADR 0065, ADR 0068).

The series are those a real Prometheus holds after scraping the running stack (see
``tests/fixtures/prometheus.py``), which also runs every expression; this module only reads the
expressions, parsed with ``promql-parser`` (Prometheus' PromQL grammar as a Python binding),
because a selector on a label no series carries is not an error to Prometheus: it selects
nothing, or (``name=~".*"`` once Grafana's "All" is chosen) everything, and the panel looks
fine. :func:`unknown_names` reports a selector's name and matchers, ``by``/``without`` and
``on``/``ignoring`` labels, and the label of a ``label_values`` variable query. Grafana's
``$variable`` references are replaced by ``.*`` before parsing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import promql_parser as pp

#: Series another exporter serves (the NATS exporter), never an endpoint of the stack.
NOT_OURS = frozenset({"jetstream_stream_total_messages"})

Names = Mapping[str, list[dict[str, str]]]


def by_name(series: Iterable[Mapping[str, str]]) -> dict[str, list[dict[str, str]]]:
    """Label sets (as Prometheus' series API lists them) grouped by metric name, without it."""
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    for labels in series:
        out[labels["__name__"]].append({k: v for k, v in labels.items() if k != "__name__"})
    return out


def _grafana(expr: str) -> str:
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def _children(node: Any) -> list[Any]:
    kids = []
    for attr in ("lhs", "rhs", "expr", "param", "vector_selector"):
        value = getattr(node, attr, None)
        if value is not None and not isinstance(value, (int, float, str)):
            kids.append(value)
    kids.extend(getattr(node, "args", None) or [])
    return kids


def _selectors(node: Any) -> list[Any]:
    if isinstance(node, pp.VectorSelector):
        return [node]
    return [s for child in _children(node) for s in _selectors(child)]


def unknown_names(where: str, expr: str, names: Names) -> list[str]:
    """What ``expr`` uses that no series in ``names`` carries (empty: all there)."""
    problems: list[str] = []
    label_query = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", expr.strip())
    if label_query:
        expr, wanted = label_query.group(1), label_query.group(2)
        for selector in _selectors(pp.parse(_grafana(expr))):
            if not any(wanted in s for s in names.get(selector.name, [])):
                problems.append(f"{where}: no {selector.name} series carries label {wanted!r}")
    tree = pp.parse(_grafana(expr))

    def labels_of(node: Any) -> set[str]:
        carried: set[str] = set()
        for selector in _selectors(node):
            for series in names.get(selector.name, []):
                carried |= set(series)
        return carried | {"le"}

    def visit(node: Any) -> None:
        if isinstance(node, pp.VectorSelector):
            if node.name in NOT_OURS:
                return
            series = names.get(node.name)
            if not series:
                problems.append(f"{where}: no series {node.name}")
                return
            for matcher in node.matchers.matchers:
                if not any(matcher.name in s for s in series):
                    problems.append(f"{where}: no {node.name} series carries {matcher.name!r}")
        modifier = getattr(node, "modifier", None)
        labels = list(getattr(modifier, "labels", None) or [])
        matching = getattr(modifier, "matching", None)
        if matching is not None:
            labels += list(matching.labels or [])
        under = [s for s in _selectors(node) if s.name not in NOT_OURS]
        # A selector with no series at all is reported as such above, not once per label.
        if labels and any(names.get(s.name) for s in under):
            carried = labels_of(node)
            for label in labels:
                if label not in carried:
                    problems.append(f"{where}: no series under it carries {label!r}")
        for child in _children(node):
            visit(child)

    visit(tree)
    return problems


__all__ = ["NOT_OURS", "by_name", "unknown_names"]
