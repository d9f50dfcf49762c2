"""``meta.k8s.io/v1`` Table responses, what ``kubectl get`` asks for
(``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``).

As a real API server does for custom resources: the columns are NAME plus the CRD version's
``additionalPrinterColumns``, each a JSON field path evaluated on the object (simple fields,
and one equality filter on a list such as ``.status.conditions[?(@.type=="Ready")].reason``,
which picks the first matching item); without
printer columns, NAME and AGE. ``date`` cells become an age (``5m``), missing values ``null``
(kubectl prints ``<none>``). The server takes the columns from a CustomResourceDefinition
created in the emulator, else from :data:`arcflow.common.kube.printer_columns.PRINTER_COLUMNS`
for the four actions.github.com kinds, which the emulator serves without a CRD object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "",
    "priority": 0,
}
_AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_UNESCAPED_DOT = re.compile(r"(?<!\\)\.")
#: ``name[?(@.field=="value")]``: the items of list ``name`` whose ``field`` is ``value``.
_FILTER = re.compile(r'^(?P<name>[^\[\]]+)\[\?\(@\.(?P<field>\w+)=="(?P<value>[^"]*)"\)\]$')
_FILTER_IN_PATH = re.compile(r'\[\?\(@\.\w+=="[^"]*"\)\]')


@dataclass(frozen=True)
class ListFilter:
    """One ``list[?(@.field=="value")]`` step of a printer column path."""

    name: str
    field: str
    value: str


class JsonPathError(ValueError):
    """A printer column path this emulator (and a real API server) does not accept."""


def split_json_path(path: str) -> list[str | ListFilter]:
    """``.metadata.labels.a\\.b/c`` -> ``["metadata", "labels", "a.b/c"]``; a
    ``conditions[?(@.type=="X")]`` step becomes a :class:`ListFilter`."""
    if not path.startswith("."):
        raise JsonPathError(f"a printer column path must start with '.', got {path!r}")
    filters = _FILTER_IN_PATH.findall(path)
    masked = _FILTER_IN_PATH.sub("\x00", path[1:])
    parts: list[str | ListFilter] = []
    for raw in _UNESCAPED_DOT.split(masked):
        if "\x00" in raw:
            match = _FILTER.match(raw.replace("\x00", filters.pop(0), 1))
            if match is None or "\x00" in raw.replace("\x00", "", 1):
                raise JsonPathError(f"unsupported filter in {path!r}")
            parts.append(ListFilter(match["name"], match["field"], match["value"]))
            continue
        part = raw.replace("\\.", ".")
        if not part or any(c in part for c in "[]*{}"):
            raise JsonPathError(f"only field paths and list filters are supported, got {path!r}")
        parts.append(part)
    return parts


def evaluate(obj: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in ``obj``, or ``None`` when a field is missing."""
    node: Any = obj
    for part in split_json_path(path):
        if isinstance(part, ListFilter):
            items = node.get(part.name) if isinstance(node, Mapping) else None
            node = next(
                (
                    item
                    for item in items or []
                    if isinstance(item, Mapping) and str(item.get(part.field)) == part.value
                ),
                None,
            )
            if node is None:
                return None
            continue
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def age(timestamp: Any, now: datetime) -> str | None:
    """Kubernetes' short human duration since ``timestamp`` (``45s``, ``3m``, ``5h``, ``2d``)."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        created = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = max(0, int((now - created).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _cell(value: Any, column_type: str, now: datetime) -> Any:
    if value is None:
        return None
    if column_type == "date":
        return age(value, now)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def as_table(
    listing: Mapping[str, Any],
    columns: Sequence[Mapping[str, Any]] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A Table of ``listing`` (a list or one object) with NAME and ``columns``
    (``additionalPrinterColumns`` entries: name, type, jsonPath, optional priority)."""
    moment = now or datetime.now(UTC)
    printer = list(columns) if columns else [_AGE_COLUMN]
    for column in printer:
        split_json_path(str(column["jsonPath"]))
    items = listing.get("items")
    objects = items if isinstance(items, list) else [listing]
    rows = []
    for obj in objects:
        meta = obj.get("metadata", {})
        cells = [meta.get("name", "")]
        cells += [
            _cell(evaluate(obj, str(c["jsonPath"])), str(c.get("type", "string")), moment)
            for c in printer
        ]
        rows.append(
            {
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                },
            }
        )
    definitions = [dict(_NAME_COLUMN)] + [
        {
            "name": c["name"],
            "type": c.get("type", "string"),
            "format": "",
            "description": c.get("description", ""),
            "priority": int(c.get("priority", 0)),
        }
        for c in printer
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": listing.get("metadata", {}).get("resourceVersion", "")},
        "columnDefinitions": definitions,
        "rows": rows,
    }
