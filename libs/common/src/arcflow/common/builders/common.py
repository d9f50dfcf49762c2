"""Helpers shared by every builder: label/annotation merging, owner refs, Secret data, ids."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from arcflow.common.constants import (
    ANNOTATION_SCALE_SET_ID,
    ANNOTATION_SCALE_SET_IDS,
    DEFAULT_VARIANT,
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
)
from arcflow.common.github_url import InvalidGitHubConfigUrlError, parse_github_config_url
from arcflow.common.listener_config import go_json_dumps
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.naming import trim_label_value


class BuildError(ValueError):
    """The desired object cannot be built from this input; the message says why."""


class ScaleSetIdError(BuildError):
    """A variant has no usable runner scale set id (not registered yet, or a bad annotation)."""


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    exclude_prefixes: Iterable[str],
) -> dict[str, str] | None:
    """Upstream ``filterAndMergeLabels``: base then overwrite, minus excluded prefixes.

    ``None`` when both inputs are ``None`` (so a child gets no ``labels`` key at all).
    """
    if base is None and overwrite is None:
        return None
    prefixes = tuple(exclude_prefixes)
    merged: dict[str, str] = {}
    for source in (base or {}, overwrite or {}):
        for key, value in source.items():
            if prefixes and key.startswith(prefixes):
                continue
            merged[key] = value
    return merged


def merge_annotations(
    base: Mapping[str, str] | None, overwrite: Mapping[str, str] | None
) -> dict[str, str]:
    """Upstream ``mergeAnnotations``: clone base, overlay overwrite, no filtering."""
    merged = dict(base or {})
    merged.update(overwrite or {})
    return merged


def github_url_labels(github_config_url: str) -> dict[str, str]:
    """``applyGitHubURLLabels``: enterprise/organization/repository, trimmed, only when set."""
    try:
        config = parse_github_config_url(github_config_url)
    except InvalidGitHubConfigUrlError as exc:
        raise BuildError(f"githubConfigUrl {github_config_url!r}: {exc}") from exc
    labels: dict[str, str] = {}
    for key, value in (
        (LABEL_ENTERPRISE, config.enterprise),
        (LABEL_ORGANIZATION, config.organization),
        (LABEL_REPOSITORY, config.repository),
    ):
        if value:
            labels[key] = trim_label_value(value)
    return labels


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller owner reference to ``owner`` (a manifest dict), as upstream sets them."""
    metadata = owner.get("metadata") or {}
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": metadata.get("name", ""),
        "uid": metadata.get("uid") or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def encode_secret_data(data: Mapping[str, str]) -> dict[str, str]:
    """Secret ``data`` as the API stores it: base64 of the UTF-8 value, keys in given order."""
    return {k: base64.b64encode(v.encode("utf-8")).decode("ascii") for k, v in data.items()}


def decode_secret_data(data: Mapping[str, str] | None) -> dict[str, str]:
    """Inverse of :func:`encode_secret_data` (for hashing and rendering what was read back)."""
    return {k: base64.b64decode(v).decode("utf-8") for k, v in (data or {}).items()}


def meta_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    metadata = doc.get("metadata")
    return dict(metadata) if isinstance(metadata, Mapping) else {}


def resource_meta(
    spec: Mapping[str, Any], key: str
) -> tuple[dict[str, str] | None, dict[str, str]]:
    """``(labels, annotations)`` of a ResourceMeta field of an ARS/AL spec dict."""
    meta = spec.get(key) or {}
    labels = meta.get("labels")
    return (dict(labels) if labels is not None else None), dict(meta.get("annotations") or {})


# --- ARS scale set id annotations ------------------------------------------------------------


def encode_scale_set_ids(ids: Mapping[str, int]) -> str:
    """The ``runner-scale-set-ids`` annotation: keys sorted, like Go's json of a map."""
    return go_json_dumps({name: int(ids[name]) for name in sorted(ids)})


def decode_scale_set_ids(text: str) -> dict[str, int]:
    """Parse the ``runner-scale-set-ids`` annotation; :class:`ScaleSetIdError` if malformed."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScaleSetIdError(f"{ANNOTATION_SCALE_SET_IDS} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        raise ScaleSetIdError(
            f"{ANNOTATION_SCALE_SET_IDS} must be a JSON object of variant name to integer id"
        )
    return dict(value)


def _variant_name(variant: object) -> str:
    if isinstance(variant, str):
        return variant
    name = getattr(variant, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"expected a variant name or an EffectiveVariant, got {type(variant)!r}")
    return name


def scale_set_id_for_variant(ars: AutoscalingRunnerSet, variant: object) -> int:
    """The registered scale set id of one variant, read from the ARS annotations.

    The default variant uses the scalar ``runner-scale-set-id``; a named one the JSON map in
    ``runner-scale-set-ids``. Missing, malformed or non-positive ids raise
    :class:`ScaleSetIdError` naming the variant, never a silent 0.
    """
    name = _variant_name(variant)
    annotations = ars.metadata.annotations or {}
    if name == DEFAULT_VARIANT:
        raw = annotations.get(ANNOTATION_SCALE_SET_ID)
        if raw is None:
            raise ScaleSetIdError(f"annotation {ANNOTATION_SCALE_SET_ID} is missing")
        try:
            scalar = int(raw)
        except ValueError as exc:
            raise ScaleSetIdError(
                f"annotation {ANNOTATION_SCALE_SET_ID} is not an integer: {raw!r}"
            ) from exc
        if scalar <= 0:
            raise ScaleSetIdError(f"annotation {ANNOTATION_SCALE_SET_ID} must be > 0, got {scalar}")
        return scalar
    raw_map = annotations.get(ANNOTATION_SCALE_SET_IDS)
    if raw_map is None:
        raise ScaleSetIdError(f"annotation {ANNOTATION_SCALE_SET_IDS} is missing")
    ids = decode_scale_set_ids(raw_map)
    if name not in ids:
        raise ScaleSetIdError(f"variant {name!r} has no id in {ANNOTATION_SCALE_SET_IDS}")
    if ids[name] <= 0:
        raise ScaleSetIdError(f"variant {name!r} has id {ids[name]}; it must be > 0")
    return ids[name]


def scale_set_ids_from_annotations(ars: AutoscalingRunnerSet) -> dict[str, int]:
    """Ids of every effective variant (the ``ids`` argument of the builders)."""
    return {v.name: scale_set_id_for_variant(ars, v.name) for v in ars.spec.effective_variants()}
