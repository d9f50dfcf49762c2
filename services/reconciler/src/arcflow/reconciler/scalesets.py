"""Reading the registrar's scale set ids from the ``arcflow_scalesets`` KV bucket.

The registrar owns the bucket; a value is its JSON record (ids and names only, never a
credential). Keys are ``<ns>.<ars>.<variant>`` with ``_`` for the default variant and ``.`` in
a name written as ``=`` (KV keys allow neither ``~`` nor an empty token). This mirrors the
registrar's ``records.record_key``: it is part of the wire contract between the two services.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

DEFAULT_VARIANT_KEY = "_"


def record_key(namespace: str, ars: str, variant: str = "") -> str:
    token = DEFAULT_VARIANT_KEY if variant == "" else variant.replace(".", "=")
    return f"{namespace.replace('.', '=')}.{ars.replace('.', '=')}.{token}"


@dataclass(frozen=True, slots=True)
class ScaleSetAssignment:
    variant: str
    scale_set_id: int
    scale_set_name: str
    runner_group_name: str


def parse_record(variant: str, data: bytes) -> ScaleSetAssignment | None:
    """The assignment in one KV value, or ``None`` if it is not a usable record."""
    try:
        raw = json.loads(data)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    scale_set_id = raw.get("scale_set_id")
    if isinstance(scale_set_id, bool) or not isinstance(scale_set_id, int) or scale_set_id <= 0:
        return None
    return ScaleSetAssignment(
        variant=variant,
        scale_set_id=scale_set_id,
        scale_set_name=str(raw.get("scale_set_name") or ""),
        runner_group_name=str(raw.get("runner_group_name") or ""),
    )


class ScaleSetIds:
    """Per-variant assignments of one ARS, read fresh on every reconcile (level-triggered)."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def assignments(
        self, namespace: str, ars: str, variants: Iterable[str]
    ) -> dict[str, ScaleSetAssignment]:
        """Assignments of the given variants; a variant not registered yet is absent."""
        found: dict[str, ScaleSetAssignment] = {}
        for variant in variants:
            try:
                entry = await self._kv.get(record_key(namespace, ars, variant))
            except KeyNotFoundError:
                continue
            if entry.value is None:
                continue
            assignment = parse_record(variant, entry.value)
            if assignment is not None:
                found[variant] = assignment
        return found
