"""The emulator's plain-dict objects: their type aliases and the two helpers every part uses."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
ObjectKey = tuple[str, str]  # (namespace or "", name)
ResourceKey = tuple[str, str]  # (group, plural)


def now() -> str:
    """A timestamp as the API server writes one (RFC 3339, whole seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` of ``obj``; an empty dict when it has none."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}
