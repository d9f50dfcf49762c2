"""Reading and patching plain manifests (dicts as the API server returns them): metadata
accessors, finalizer and merge patches, upstream's runner pod failure backoff. Pure: the rules
modules use these without the controllers' I/O context (:mod:`.base`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arcflow.common.models import KubeObject

Manifest = dict[str, Any]

# Upstream's runner pod failure backoff, indexed by the number of recorded failures
# (docs/upstream-behaviour.md#runner-controller).
FAILURE_BACKOFF_SECONDS: tuple[float, ...] = (0, 5, 10, 20, 40, 80)


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def finalizer_patch(obj: KubeObject | Mapping[str, Any], finalizers: list[str]) -> dict[str, Any]:
    """Merge patch replacing the finalizer list, conditional on the read resourceVersion."""
    return {"metadata": {"finalizers": finalizers, "resourceVersion": resource_version(obj)}}


def resource_version(obj: KubeObject | Mapping[str, Any]) -> str | None:
    if isinstance(obj, KubeObject):
        return obj.resource_version
    value = meta(obj).get("resourceVersion")
    return None if value is None else str(value)


def owner_name(obj: KubeObject, kind: str) -> str | None:
    """The name of ``obj``'s controller owner of ``kind``."""
    for ref in obj.metadata.owner_references or []:
        if ref.kind == kind and ref.controller:
            return ref.name
    return None


def contains(actual: Mapping[str, str] | None, wanted: Mapping[str, str] | None) -> bool:
    """Every wanted key is present with the wanted value (extra keys are someone else's)."""
    actual = actual or {}
    return all(actual.get(k) == v for k, v in (wanted or {}).items())


def owned_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    return any(ref.get("uid") == owner_uid for ref in meta(obj).get("ownerReferences") or [])


def merge_patch_to(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch that turns ``old`` into ``new`` (keys removed become null).

    A plain ``{"spec": desired}`` merge patch would keep keys the desired object dropped.
    """
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch_to(old[key], value)
    return patch
