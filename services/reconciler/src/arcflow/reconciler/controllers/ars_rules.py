"""Pure decisions of the AutoscalingRunnerSet controller: the version gate, the outdated loop
guard's delay and records, the scale set id annotations and URL labels, the summed status
counts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from arcflow.common.builders import BuildError, encode_scale_set_ids, github_url_labels
from arcflow.common.constants import (
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_SCALE_SET_ID,
    ANNOTATION_SCALE_SET_IDS,
    ANNOTATION_SCALE_SET_NAME,
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
)
from arcflow.common.models import (
    AutoscalingRunnerSet,
    EphemeralRunnerSet,
    KubeObject,
    is_multi_variant,
)
from arcflow.reconciler.assignments import ScaleSetAssignment
from arcflow.reconciler.controllers.manifest import Manifest, meta

# Per variant: how often its outdated ERS was recreated, the last time, and which ERS (uid)
# that attempt was about; the loop guard of docs/upstream-behaviour.md#traps.
ANNOTATION_OUTDATED_RECREATIONS = "arcflow.io/outdated-recreations"

_SEMVER = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$")


def is_version_allowed(resource_version: str, build_version: str) -> bool:
    """docs/upstream-behaviour.md#ars-controller (pure): ``dev`` and ``canary-*`` builds allow
    anything; else the label must
    equal the build or share its semver major.minor. No or garbage label: not allowed."""
    if build_version == "dev" or build_version.startswith("canary-"):
        return True
    if resource_version == build_version:
        return True
    resource = _SEMVER.match(resource_version)
    build = _SEMVER.match(build_version)
    if resource is None or build is None:
        return False
    return resource.group(1, 2) == build.group(1, 2)


def outdated_recreate_delay(attempts: int, base: float, cap: float) -> float:
    """Wait before recreating an outdated set again: 0 the first time, then base doubling."""
    if attempts <= 0:
        return 0.0
    return float(min(cap, base * (2 ** min(attempts - 1, 30))))


@dataclass(frozen=True, slots=True)
class OutdatedRecord:
    """One variant's loop-guard record: how many recreations so far, when the last one was
    (epoch seconds) and which EphemeralRunnerSet (uid) it was about."""

    count: int = 0
    last: float = 0.0
    uid: str = ""


def outdated_records(annotations: Mapping[str, str]) -> dict[str, OutdatedRecord]:
    """The loop guard's per-variant records from the ARS annotations (unreadable: none; an
    unreadable entry: left out)."""
    raw = annotations.get(ANNOTATION_OUTDATED_RECREATIONS)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    records: dict[str, OutdatedRecord] = {}
    for variant, entry in value.items() if isinstance(value, dict) else ():
        if not isinstance(entry, dict):
            continue
        try:
            records[str(variant)] = OutdatedRecord(
                int(entry.get("count") or 0),
                float(entry.get("last") or 0),
                str(entry.get("uid") or ""),
            )
        except (TypeError, ValueError):
            continue
    return records


def encode_outdated_records(records: Mapping[str, OutdatedRecord]) -> str:
    """The annotation value of :func:`outdated_records`."""
    return json.dumps(
        {v: {"count": r.count, "last": r.last, "uid": r.uid} for v, r in records.items()}
    )


def id_annotations(
    ars: AutoscalingRunnerSet, assignments: dict[str, ScaleSetAssignment]
) -> dict[str, str | None]:
    """ARS annotations mirroring the registrar's ids (``None`` = remove the key).

    The scalar keys carry the default variant, or in variant mode the *first* variant (as
    upstream mirrors it); the JSON map exists only in variant mode.
    """
    variants = ars.spec.effective_variants()
    first = assignments[variants[0].name]
    wanted: dict[str, str | None] = {
        ANNOTATION_SCALE_SET_ID: str(first.scale_set_id),
        ANNOTATION_SCALE_SET_NAME: first.scale_set_name,
        ANNOTATION_RUNNER_GROUP_NAME: first.runner_group_name,
    }
    if is_multi_variant(ars.spec):
        wanted[ANNOTATION_SCALE_SET_IDS] = encode_scale_set_ids(
            {v.name: assignments[v.name].scale_set_id for v in variants}
        )
    else:
        wanted[ANNOTATION_SCALE_SET_IDS] = None
    return wanted


def url_labels(ars: AutoscalingRunnerSet) -> dict[str, str | None]:
    """The ARS's own enterprise/organization/repository labels from its ``githubConfigUrl``
    (docs/upstream-behaviour.md#ars-url-labels), ``None`` = remove the key.

    Each key is set only when that part of the URL is non-empty, trimmed to a label value as
    on the children; a key the URL no longer has is removed (upstream leaves it behind). A URL
    that does not parse gives no wanted labels at all: validation refuses it elsewhere, and
    labels already on the object are left as they are.
    """
    try:
        present = github_url_labels(ars.spec.github_config_url)
    except BuildError:
        return {}
    keys = (LABEL_ENTERPRISE, LABEL_ORGANIZATION, LABEL_REPOSITORY)
    return {key: present.get(key) for key in keys}


def annotations_need_patch(current: Mapping[str, str], wanted: dict[str, str | None]) -> bool:
    """Also for labels: true when some key differs (``None``: must be absent)."""
    return any(current.get(k) != v for k, v in wanted.items())


def sum_status(runner_sets: Sequence[EphemeralRunnerSet]) -> dict[str, int]:
    """The ARS counts: each EphemeralRunnerSet's status summed over the variants."""
    total = {"current": 0, "pending": 0, "running": 0, "failed": 0}
    for ers in runner_sets:
        status = ers.status
        if status is None:
            continue
        total["current"] += status.current_replicas
        total["pending"] += status.pending_ephemeral_runners
        total["running"] += status.running_ephemeral_runners
        total["failed"] += status.failed_ephemeral_runners
    return total


def variant_of(ers: Manifest | KubeObject, ars: AutoscalingRunnerSet) -> str:
    """The variant an EphemeralRunnerSet of ``ars`` serves, from its name (``""``: default)."""
    name = ers.name if isinstance(ers, KubeObject) else str(meta(ers).get("name", ""))
    prefix = f"{ars.name}-"
    return name[len(prefix) :] if name.startswith(prefix) else ""
