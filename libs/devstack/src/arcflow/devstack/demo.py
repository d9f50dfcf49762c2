"""The dev stack's demo: the example ARS, the workload spread over its variants, the summary.

Everything here is pure (no clock, no I/O except :func:`load_example_ars`), so the numbers the
scenario test asserts are computed by code that is tested on its own.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from arcflow.common import naming
from arcflow.common.constants import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.models.variants import effective_variants

EXAMPLE_RELATIVE_PATH = Path("examples") / "02-runner-variants.yaml"
DEFAULT_GITHUB_SECRET = "arc-github-secret"


class DemoError(ValueError):
    """The example ARS or the demo options cannot be used; the message says why."""


@dataclass(frozen=True)
class VariantTarget:
    """Where demo jobs for one variant go: the scale set name doubles as a unique job label."""

    variant: str
    scale_set_name: str

    @property
    def job_labels(self) -> list[str]:
        # The registrar gives every scale set its own name as first label (planning.py), so a
        # job asking for it lands on exactly this variant whatever the shared labels are.
        return [self.scale_set_name]


@dataclass(frozen=True)
class DemoJob:
    variant: str
    labels: list[str]
    duration: float


@dataclass
class JobRecord:
    """One demo job as observed: wall-clock seconds (``time.time()``) or ``None`` if not yet."""

    job_id: str
    variant: str
    queued_at: float
    runner_pod_created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: str | None = None
    state: str = "queued"


@dataclass
class ViewCounts:
    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0


@dataclass(frozen=True)
class LatencyStats:
    count: int
    p50: float | None
    p95: float | None
    max: float | None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "p50": self.p50, "p95": self.p95, "max": self.max}


@dataclass
class SummaryInputs:
    """What the stack observed; :func:`build_summary` turns it into the summary JSON."""

    jobs: list[JobRecord]
    variants: list[str]
    scale_set_ids: dict[str, int]
    pods_created: dict[str, int]
    objects_created: dict[str, int]
    components: dict[str, str]
    blocked_by: list[str] = field(default_factory=list)
    duration_seconds: float = 0.0
    timed_out: bool = False
    requested_jobs: int = 0
    teardown: str = "not needed"
    left_behind: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Supervised service -> how often it was restarted after it exited.
    restarts: dict[str, int] = field(default_factory=dict)
    #: Stopped (Ctrl-C, SIGTERM) before every demo job had finished.
    interrupted: bool = False


# --- the example ARS --------------------------------------------------------------------------


def find_example(start: Path | None = None) -> Path | None:
    """``examples/02-runner-variants.yaml`` in ``start`` or a parent (the repo checkout)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / EXAMPLE_RELATIVE_PATH
        if candidate.is_file():
            return candidate
    module_dir = Path(__file__).resolve()
    for folder in module_dir.parents:
        candidate = folder / EXAMPLE_RELATIVE_PATH
        if candidate.is_file():
            return candidate
    return None


def load_example_ars(path: Path) -> dict[str, Any]:
    """Read the first AutoscalingRunnerSet document of a YAML file."""
    try:
        documents = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise DemoError(f"cannot read {path}: {exc}") from None
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == "AutoscalingRunnerSet":
            return document
    raise DemoError(f"{path} holds no AutoscalingRunnerSet")


def prepare_ars(
    ars: Mapping[str, Any], *, github_config_url: str | None, secret_name: str | None = None
) -> dict[str, Any]:
    """The example pointed at the stack's GitHub (simulator or real) and credentials Secret."""
    prepared = copy.deepcopy(dict(ars))
    spec = prepared.setdefault("spec", {})
    if github_config_url:
        spec["githubConfigUrl"] = github_config_url
    spec["githubConfigSecret"] = (
        secret_name or spec.get("githubConfigSecret") or (DEFAULT_GITHUB_SECRET)
    )
    meta = prepared.setdefault("metadata", {})
    meta.setdefault("namespace", "default")
    if not meta.get("name"):
        raise DemoError("the example ARS has no metadata.name")
    AutoscalingRunnerSet.model_validate(prepared)  # a clear error before anything is applied
    return prepared


def variant_targets(ars: Mapping[str, Any]) -> list[VariantTarget]:
    """One target per effective variant, in declared order."""
    model = AutoscalingRunnerSet.model_validate(dict(ars))
    base = model.scale_set_base_name
    return [
        VariantTarget(variant=v.name, scale_set_name=naming.scale_set_name(base, v.name))
        for v in effective_variants(model.spec)
    ]


# --- workload ---------------------------------------------------------------------------------


def plan_demo_jobs(
    targets: Sequence[VariantTarget], total: int, *, base_duration: float = 1.0
) -> list[DemoJob]:
    """``total`` jobs round-robin over the variants; durations cycle 1x, 1.5x, 2x the base so the
    view shows jobs finishing at different times. Deterministic: same inputs, same plan."""
    if total < 0:
        raise DemoError("the number of demo jobs must not be negative")
    if base_duration < 0:
        raise DemoError("the job duration must not be negative")
    if not targets and total:
        raise DemoError("the ARS has no variant to send jobs to")
    factors = (1.0, 1.5, 2.0)
    jobs: list[DemoJob] = []
    for index in range(total):
        target = targets[index % len(targets)]
        duration = round(base_duration * factors[(index // len(targets)) % len(factors)], 3)
        jobs.append(DemoJob(target.variant, target.job_labels, duration))
    return jobs


# --- teardown -------------------------------------------------------------------------------


def object_ref(obj: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped): how a leftover is named."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = meta.get("name") or "?"
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{obj.get('kind') or '?'} {where}"


def grow_demo_tree(
    objects: Iterable[Mapping[str, Any]], known: set[str], *, ars_name: str, ars_namespace: str
) -> set[str]:
    """The uids of the example ARS and everything derived from it, grown to a fixpoint.

    An object belongs when one of its owners belongs (ERS, ER, runner pods and their Secrets,
    the listener's ServiceAccount/Role/RoleBinding/config Secret/Pod) or when it carries the
    ARS's scale-set labels (the AutoscalingListener lives in another namespace, so no owner
    reference links it). ``known`` is never shrunk: a child whose owner is already gone is
    still recognised, which is what makes an orphan visible.
    """
    tree = set(known)
    pending = list(objects)
    changed = True
    while changed:
        changed = False
        rest = []
        for obj in pending:
            meta = obj.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if not uid or uid in tree:
                continue
            labels = meta.get("labels") or {}
            owners = {str(o.get("uid")) for o in meta.get("ownerReferences") or []}
            labelled = (
                labels.get(LABEL_SCALE_SET_NAME) == ars_name
                and labels.get(LABEL_SCALE_SET_NAMESPACE) == ars_namespace
            )
            if labelled or owners & tree:
                tree.add(uid)
                changed = True
            else:
                rest.append(obj)
        pending = rest
    return tree


def demo_leftovers(objects: Iterable[Mapping[str, Any]], tree: set[str]) -> list[str]:
    """Sorted ``Kind namespace/name`` of the objects still present whose uid is in ``tree``."""
    return sorted(
        object_ref(obj)
        for obj in objects
        if str((obj.get("metadata") or {}).get("uid") or "") in tree
    )


# --- summary ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``fraction`` in [0, 1]); ``None`` for no values."""
    if not values:
        return None
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must be within [0, 1]")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def latency_stats(values: Iterable[float]) -> LatencyStats:
    collected = [round(max(0.0, v), 3) for v in values]
    return LatencyStats(
        count=len(collected),
        p50=percentile(collected, 0.50),
        p95=percentile(collected, 0.95),
        max=max(collected) if collected else None,
    )


def job_succeeded(job: JobRecord) -> bool:
    return job.state == "completed" and job.result == "succeeded"


def job_failed(job: JobRecord) -> bool:
    return job.state == "completed" and job.result != "succeeded"


def counts_by_variant(jobs: Iterable[JobRecord], variants: Iterable[str]) -> dict[str, ViewCounts]:
    """Jobs per variant for the view: waiting, running, done (succeeded), failed."""
    counts = {variant: ViewCounts() for variant in variants}
    for job in jobs:
        entry = counts.setdefault(job.variant, ViewCounts())
        if job.state == "running":
            entry.running += 1
        elif job_succeeded(job):
            entry.done += 1
        elif job_failed(job):
            entry.failed += 1
        else:
            entry.queued += 1
    return counts


def other_jobs(
    simulator_jobs: Iterable[Mapping[str, Any]],
    known: Iterable[str],
    targets: Sequence[VariantTarget],
) -> list[JobRecord]:
    """Jobs queued on the simulator besides the demo (the footer's ``curl``), as records of the
    variant whose scale set name they ask for; the view counts them, the summary does not."""
    seen = set(known)
    by_label = {t.scale_set_name: t.variant for t in targets}
    records = []
    for job in simulator_jobs:
        job_id = str(job.get("jobId") or "")
        labels = list(job.get("labels") or [])
        variant = next((by_label[x] for x in labels if x in by_label), None)
        if not job_id or job_id in seen or variant is None:
            continue
        record = JobRecord(job_id=job_id, variant=variant, queued_at=0.0)
        record.state = str(job.get("state") or "queued")
        record.result = job.get("result")
        records.append(record)
    return records


def all_jobs_done(jobs: Sequence[JobRecord]) -> bool:
    """True when there is at least one job and every one finished successfully."""
    return bool(jobs) and all(job_succeeded(job) for job in jobs)


def build_summary(inputs: SummaryInputs) -> dict[str, Any]:
    """The ``--summary-json`` document (format in docs/dev-stack.md)."""
    per_variant: dict[str, dict[str, int]] = {
        v: {"queued": 0, "completed": 0, "failed": 0} for v in inputs.variants
    }
    for job in inputs.jobs:
        entry = per_variant.setdefault(job.variant, {"queued": 0, "completed": 0, "failed": 0})
        entry["queued"] += 1
        if job_succeeded(job):
            entry["completed"] += 1
        elif job_failed(job):
            entry["failed"] += 1
    to_pod = latency_stats(
        j.runner_pod_created_at - j.queued_at
        for j in inputs.jobs
        if j.runner_pod_created_at is not None
    )
    to_start = latency_stats(
        j.started_at - j.queued_at for j in inputs.jobs if j.started_at is not None
    )
    completed = sum(1 for j in inputs.jobs if job_succeeded(j))
    ok = (
        all_jobs_done(inputs.jobs)
        and not inputs.blocked_by
        and not inputs.timed_out
        and not inputs.left_behind
    )
    return {
        "ok": ok,
        "timed_out": inputs.timed_out,
        "interrupted": inputs.interrupted,
        "blocked_by": list(inputs.blocked_by),
        "duration_seconds": round(inputs.duration_seconds, 3),
        "components": dict(sorted(inputs.components.items())),
        "restarts": dict(sorted(inputs.restarts.items())),
        "scale_set_ids": {v: inputs.scale_set_ids.get(v) for v in inputs.variants},
        "jobs": {
            "requested": inputs.requested_jobs,
            "total": len(inputs.jobs),
            "completed": completed,
            "failed": sum(1 for j in inputs.jobs if job_failed(j)),
            "per_variant": per_variant,
        },
        "pods_created": dict(sorted(inputs.pods_created.items())),
        "objects_created": dict(sorted(inputs.objects_created.items())),
        "latency_seconds": {
            "job_queued_to_runner_pod_created": to_pod.to_json(),
            "job_queued_to_job_started": to_start.to_json(),
        },
        "teardown": inputs.teardown,
        "left_behind": sorted(inputs.left_behind),
        "notes": list(inputs.notes),
    }
