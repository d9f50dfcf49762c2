"""Kubernetes timestamps (RFC 3339, ``Z`` for UTC) read leniently from manifests (pure).

A condition's ``lastTransitionTime``, an object's ``creationTimestamp`` or a pod's
``startTime`` may be missing or malformed in what a controller or ``arcflow doctor`` reads;
such a value is ``None``, never an exception. A time without an offset is taken as UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def parse_kube_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
