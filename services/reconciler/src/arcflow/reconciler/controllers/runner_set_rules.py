"""Pure decisions of the EphemeralRunnerSet controller over the runners of a set (runner
manifests, as the cache lists them): upstream's buckets, the patchID gate, idle candidates."""

from __future__ import annotations

from arcflow.common.constants import ANNOTATION_PATCH_ID
from arcflow.reconciler.controllers.manifest import Manifest, annotations_of, is_deleting, meta


def bucket_runners(runners: list[Manifest]) -> dict[str, list[Manifest]]:
    """Upstream's buckets: deleting, running, finished, failed, outdated, pending."""
    buckets: dict[str, list[Manifest]] = {
        k: [] for k in ("deleting", "running", "finished", "failed", "outdated", "pending")
    }
    for er in runners:
        phase = (er.get("status") or {}).get("phase", "")
        if is_deleting(er):
            buckets["deleting"].append(er)
        elif phase == "Running":
            buckets["running"].append(er)
        elif phase == "Succeeded":
            buckets["finished"].append(er)
        elif phase == "Failed":
            buckets["failed"].append(er)
        elif phase == "Outdated":
            buckets["outdated"].append(er)
        else:
            buckets["pending"].append(er)
    return buckets


def latest_patch_id(runners: list[Manifest]) -> int:
    latest = 0
    for er in runners:
        try:
            latest = max(latest, int(annotations_of(er).get(ANNOTATION_PATCH_ID, "0")))
        except ValueError:
            continue
    return latest


def should_scale(patch_id: int, latest: int) -> bool:
    """docs/upstream-behaviour.md#scaling-and-patch-id: 0 forces; otherwise only a patch id no
    runner was created for yet."""
    return patch_id == 0 or patch_id != latest


def has_job(er: Manifest) -> bool:
    return bool((er.get("status") or {}).get("jobId"))


def runner_id(er: Manifest) -> int:
    return int((er.get("status") or {}).get("runnerId") or 0)


def idle_removal_candidates(buckets: dict[str, list[Manifest]]) -> list[Manifest]:
    """Pending then running runners, oldest first, minus unregistered and busy ones."""

    def created(er: Manifest) -> str:
        return str(meta(er).get("creationTimestamp") or "")

    ordered = sorted(buckets["pending"], key=created) + sorted(buckets["running"], key=created)
    return [er for er in ordered if runner_id(er) != 0 and not has_job(er)]
