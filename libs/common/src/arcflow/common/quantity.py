"""Kubernetes resource quantities and a pod's effective request, pure (docs/models.md#capacity).

``parse_quantity`` reads the quantity format of Kubernetes (``96``, ``500m``, ``384Gi``,
``1e3``) into an exact :class:`~fractions.Fraction`, so ``0.5`` CPU and ``500m`` compare equal
and no float rounding decides whether a pod fits a budget.

``pod_request`` counts a runner pod's request the way the scheduler and ResourceQuota do:
per resource, the larger of the largest init container request and the sum of the app
containers' requests, plus the pod ``overhead``. A container that sets only ``limits`` for
a resource requests that limit (Kubernetes defaults the request to the limit). Restartable
init containers ("sidecars", ``restartPolicy: Always``) run beside the app containers, so
they are added to the sum, and to each later init container's peak, as Kubernetes does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_QUANTITY = re.compile(
    rf"^(?P<number>{_NUMBER})(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: What a quantity message shows as examples.
QUANTITY_EXAMPLES = "such as 96, 500m, 384Gi or 1.5"


class QuantityError(ValueError):
    """A value is not a Kubernetes quantity (the message names why, never more input)."""


def parse_quantity(value: object) -> Fraction:
    """``value`` (a str or an int, as YAML gives it) as an exact number of base units."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"must be a quantity {QUANTITY_EXAMPLES}, not {type(value).__name__}")
    if isinstance(value, int):
        return Fraction(value)
    text = value.strip()
    match = _QUANTITY.match(text)
    if match is None or text != value:
        raise QuantityError(f"{value[:40]!r} is not a quantity {QUANTITY_EXAMPLES}")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * Fraction(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def non_negative_quantity(value: object) -> Fraction:
    """:func:`parse_quantity` that also refuses a negative amount."""
    amount = parse_quantity(value)
    if amount < 0:
        raise QuantityError(f"{str(value)[:40]!r} is negative; a budget must be 0 or more")
    return amount


def format_quantity(amount: Fraction) -> str:
    """A compact, exact text for ``amount``: ``96``, ``500m``, ``1.5``, or a reduced fraction."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{float(amount):g}"


ResourceAmounts = dict[str, Fraction]


def _container_requests(container: Mapping[str, Any]) -> ResourceAmounts:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return {}
    out: ResourceAmounts = {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    for source in (limits, requests):  # a request wins over the limit it defaults from
        if isinstance(source, Mapping):
            for name, raw in source.items():
                out[str(name)] = parse_quantity(raw)
    return out


def _add(into: ResourceAmounts, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _max_into(into: ResourceAmounts, more: Mapping[str, Fraction]) -> None:
    for name, amount in more.items():
        into[name] = max(into.get(name, Fraction(0)), amount)


def _containers(spec: Mapping[str, Any], key: str) -> Iterable[Mapping[str, Any]]:
    items = spec.get(key) or []
    return [c for c in items if isinstance(c, Mapping)] if isinstance(items, list) else []


def pod_request(template: Mapping[str, Any]) -> ResourceAmounts:
    """The effective request of a pod built from ``template`` (a pod template: ``spec`` inside),
    per resource name. Raises :class:`QuantityError` for an unparsable quantity."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return {}
    app: ResourceAmounts = {}
    for container in _containers(spec, "containers"):
        _add(app, _container_requests(container))
    init_peak: ResourceAmounts = {}
    sidecars: ResourceAmounts = {}
    for container in _containers(spec, "initContainers"):
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _max_into(init_peak, sidecars)
            continue
        peak = dict(sidecars)
        _add(peak, requests)
        _max_into(init_peak, peak)
    total = dict(app)
    _add(total, sidecars)
    _max_into(total, init_peak)
    overhead = spec.get("overhead") or {}
    if isinstance(overhead, Mapping):
        _add(total, {str(k): parse_quantity(v) for k, v in overhead.items()})
    return {name: amount for name, amount in total.items() if amount}


def how_many_fit(budget: Mapping[str, Fraction], per_pod: Mapping[str, Fraction]) -> int | None:
    """How many pods of request ``per_pod`` fit in ``budget`` (only the resources the budget
    names count); ``None`` when the pod requests none of them (it is not bounded by it)."""
    bound: int | None = None
    for name, available in budget.items():
        need = per_pod.get(name, Fraction(0))
        if need <= 0:
            continue
        fit = int(max(available, Fraction(0)) // need)
        bound = fit if bound is None else min(bound, fit)
    return bound
