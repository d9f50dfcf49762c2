"""The dashboard's and the PrometheusRule's PromQL against a real scrape (ADR 0065).

Not Prometheus: the stack's real ``/metrics`` endpoints are scraped (the services' and every
listener process's), each expression is parsed with ``promql-parser`` (the PromQL grammar of
Prometheus, as a Python binding), and

* :func:`unknown_names` says which metric names and label names an expression uses that no
  scraped series carries (a selector's name and matchers, ``by``/``without`` and
  ``on``/``ignoring`` labels, ``label_values`` queries of the dashboard's variables);
* :func:`evaluate` computes the few expression shapes our alerts use over the samples of one
  or two scrapes (instant selectors; ``increase``/``rate``/``delta``/``changes`` over the two
  scrapes; ``sum``/``max``/``min`` ``by``; arithmetic and comparisons between vectors matched on
  all labels, or with a number) and returns the series for which it holds. Anything else
  raises ``NotImplementedError``: a test never silently evaluates an expression wrongly.

Grafana's ``$variable`` references are replaced by ``.*`` before parsing.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser as pp
import yaml
from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
#: Series Prometheus makes itself or another exporter serves (never an arcflow endpoint).
NOT_OURS = frozenset({"up", "jetstream_stream_total_messages"})


@dataclass(frozen=True)
class Scrape:
    """Every sample of one scrape of several endpoints, and when it was taken."""

    at: float
    samples: dict[tuple[str, Labels], float]

    @property
    def names(self) -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = defaultdict(list)
        for name, labels in self.samples:
            out[name].append(dict(labels))
        return out


def parse_exposition(texts: Iterable[str], at: float) -> Scrape:
    samples: dict[tuple[str, Labels], float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return Scrape(at, samples)


def fetch(urls: Iterable[str]) -> list[str]:
    texts = []
    for url in urls:
        with urllib.request.urlopen(url, timeout=5) as response:
            texts.append(response.read().decode())
    return texts


# --- what the chart renders ---------------------------------------------------------------------


def rendered_monitoring(
    helm: Path, chart: Path, work: Path
) -> tuple[dict[str, Any], dict[str, str]]:
    """The dashboard JSON and the PrometheusRule alert expressions, as ``helm template``
    renders them with monitoring on."""
    values = work / "monitoring-values.json"
    values.write_text(
        json.dumps(
            {
                "monitoring": {
                    "prometheusRule": {"enabled": True},
                    "grafanaDashboard": {"enabled": True},
                }
            }
        )
    )
    done = subprocess.run(
        [
            str(helm),
            "template",
            "arcflow",
            str(chart),
            "--namespace",
            "arc-system",
            "-f",
            str(values),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={
            "HELM_CACHE_HOME": str(work / "helm-cache"),
            "HELM_CONFIG_HOME": str(work / "helm-config"),
            "HELM_DATA_HOME": str(work / "helm-data"),
            "PATH": "/usr/bin:/bin",
        },
    )
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    (dashboard,) = [
        json.loads(d["data"]["arcflow.json"])
        for d in docs
        if d["kind"] == "ConfigMap" and "arcflow.json" in (d.get("data") or {})
    ]
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    return dashboard, alerts


def dashboard_queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where, expression) of every panel target and every ``label_values`` variable."""
    out = []
    for panel in dashboard.get("panels") or []:
        for target in panel.get("targets") or []:
            out.append((f"panel {panel['title']!r}", str(target["expr"])))
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        definition = str(variable.get("definition") or "")
        if definition.startswith("label_values("):
            out.append((f"variable {variable['name']}", definition))
    return out


def _grafana(expr: str) -> str:
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


# --- names and labels ---------------------------------------------------------------------------


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


def _matchers(selector: Any) -> list[Any]:
    return list(selector.matchers.matchers)


def unknown_names(where: str, expr: str, scrape: Scrape) -> list[str]:
    """What ``expr`` uses that no scraped series carries (empty: all there)."""
    names = scrape.names
    problems: list[str] = []
    label_query = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", expr.strip())
    if label_query:
        expr, wanted = label_query.group(1), label_query.group(2)
        for selector in _selectors(pp.parse(_grafana(expr))):
            if not any(wanted in s for s in names.get(selector.name, [])):
                problems.append(f"{where}: no {selector.name} series carries label {wanted!r}")
        expr = label_query.group(1)
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
            for matcher in _matchers(node):
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


# --- evaluation of the simple shapes ------------------------------------------------------------


Vector = dict[Labels, float]
_COMPARE = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_ARITH = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _select(selector: Any, scrape: Scrape) -> Vector:
    out: Vector = {}
    for (name, labels), value in scrape.samples.items():
        if name != selector.name:
            continue
        as_dict = dict(labels)
        if all(_match(m, as_dict.get(m.name, "")) for m in _matchers(selector)):
            out[labels] = value
    return out


def _match(matcher: Any, value: str) -> bool:
    op = str(matcher.op)
    if op.endswith("NotRe"):
        return re.fullmatch(matcher.value, value) is None
    if op.endswith("Re"):
        return re.fullmatch(matcher.value, value) is not None
    if op.endswith("NotEqual"):
        return value != matcher.value
    return value == matcher.value


def evaluate(expr: str, now: Scrape, before: Scrape | None = None) -> Vector:
    """The series for which ``expr`` (an alert) holds on ``now`` (``before``: the earlier
    scrape range functions compare with)."""

    def ev(node: Any) -> Vector | float:
        if isinstance(node, pp.NumberLiteral):
            return float(node.val)
        if isinstance(node, pp.ParenExpr):
            return ev(node.expr)
        if isinstance(node, pp.VectorSelector):
            return _select(node, now)
        if isinstance(node, pp.Call):
            func = node.func.name
            if func in ("increase", "rate", "delta", "changes"):
                if before is None:
                    raise NotImplementedError(f"{func} needs an earlier scrape")
                selector = node.args[0].vector_selector
                late, early = _select(selector, now), _select(selector, before)
                out: Vector = {}
                for labels, value in late.items():
                    start = early.get(labels, 0.0)
                    diff = value - start
                    if func == "changes":
                        diff = float(value != start)
                    elif func == "rate":
                        diff = diff / max(1e-9, now.at - before.at)
                    out[labels] = diff
                return out
            raise NotImplementedError(f"function {func}")
        if isinstance(node, pp.AggregateExpr):
            op = str(node.op).rsplit(".", 1)[-1].lower().strip("'\" ")
            inner = ev(node.expr)
            if not isinstance(inner, dict):
                raise NotImplementedError("aggregation of a number")
            keep = list(getattr(node.modifier, "labels", None) or [])
            groups: dict[Labels, list[float]] = defaultdict(list)
            for labels, value in inner.items():
                as_dict = dict(labels)
                groups[tuple((k, as_dict.get(k, "")) for k in sorted(keep))].append(value)
            reduce = {"sum": sum, "max": max, "min": min}.get(op)
            if reduce is None:
                raise NotImplementedError(f"aggregation {op}")
            return {labels: float(reduce(values)) for labels, values in groups.items()}
        if isinstance(node, pp.BinaryExpr):
            op = str(node.op).strip()
            lhs, rhs = ev(node.lhs), ev(node.rhs)
            if op in _COMPARE:
                compare = _COMPARE[op]
                if isinstance(lhs, dict) and not isinstance(rhs, dict):
                    return {k: v for k, v in lhs.items() if compare(v, rhs)}
                if isinstance(lhs, dict) and isinstance(rhs, dict):
                    return {k: v for k, v in lhs.items() if k in rhs and compare(v, rhs[k])}
            if op in _ARITH and isinstance(lhs, dict) and isinstance(rhs, dict):
                return {k: _ARITH[op](v, rhs[k]) for k, v in lhs.items() if k in rhs}
            raise NotImplementedError(f"binary {op}")
        raise NotImplementedError(type(node).__name__)

    result = ev(pp.parse(expr))
    if not isinstance(result, dict):
        raise NotImplementedError("a number, not a vector")
    return result


__all__ = [
    "NOT_OURS",
    "Scrape",
    "dashboard_queries",
    "evaluate",
    "fetch",
    "parse_exposition",
    "rendered_monitoring",
    "unknown_names",
]
