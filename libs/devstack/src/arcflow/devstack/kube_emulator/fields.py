"""Field selectors: parsed as a real server parses them, refused where it refuses them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.kube.resources import Resource
from arcflow.devstack.kube_emulator.status import bad_request


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``path=value`` / ``path!=value`` on a dotted field path (``metadata.name``)."""

    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        node: Any = obj
        for part in self.path:
            node = node.get(part) if isinstance(node, dict) else None
        actual = "" if node is None else str(node)
        return (actual != self.value) if self.negate else (actual == self.value)


#: The field selectors a real server accepts beyond ``metadata.name`` and
#: ``metadata.namespace`` (which every kind has), per built-in kind; custom kinds accept only
#: those two (unless their CRD declares ``selectableFields``, which arcflow's do not).
_SELECTABLE_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "events"): frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    ("", "pods"): frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
}
_ALWAYS_SELECTABLE = frozenset({"metadata.name", "metadata.namespace"})


def check_field_selector(resource: Resource, fields: tuple[FieldRequirement, ...]) -> None:
    """400 for a field the real server cannot select on (it answers so, it never ignores)."""
    allowed = _ALWAYS_SELECTABLE | _SELECTABLE_FIELDS.get(
        (resource.group, resource.plural), frozenset()
    )
    for requirement in fields:
        label = ".".join(requirement.path)
        if label not in allowed:
            raise bad_request(
                f"field label not supported for {resource.qualified_plural}: {label} "
                f"(selectable: {', '.join(sorted(allowed))})"
            )


def parse_field_selector(selector: str | None) -> tuple[FieldRequirement, ...]:
    if not selector:
        return ()
    result: list[FieldRequirement] = []
    for part in selector.split(","):
        part = part.strip()
        for op, negate in (("!=", True), ("==", False), ("=", False)):
            if op in part:
                key, value = part.split(op, 1)
                result.append(
                    FieldRequirement(tuple(key.strip().split(".")), value.strip(), negate)
                )
                break
        else:
            raise bad_request(f"invalid field selector requirement {part!r}")
    return tuple(result)
