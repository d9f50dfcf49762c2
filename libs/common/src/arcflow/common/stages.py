"""The stages of a runner's life, as ``arcflow_runner_stage_seconds{stage=...}`` reports them
(docs/operations.md#runner-stages, ADR 0065). Pure: names, order and who observes each.

One histogram family, exported by whichever process sees both ends of a stage: the listener
for the stages that start or end at one of GitHub's job times, the reconciler for the stages
between a scale request it serves and the runner that request made being gone. Every series
carries upstream's scale-set labels (``name`` is the EphemeralRunnerSet, ``namespace``,
``enterprise``, ``organization``, ``repository``) plus ``variant``.
"""

from __future__ import annotations

import math
from typing import Final, Literal

STAGE_METRIC: Final = "arcflow_runner_stage_seconds"
STAGE_DESCRIPTION: Final = (
    "Seconds a runner (or its job) spent in one stage of its life; see docs/operations.md"
)
LABEL_STAGE: Final = "stage"
LABEL_VARIANT: Final = "variant"
#: Upstream's scale-set labels, then ours.
STAGE_LABELS: Final = (
    "name",
    "namespace",
    "enterprise",
    "organization",
    "repository",
    LABEL_VARIANT,
    LABEL_STAGE,
)

Observer = Literal["listener", "reconciler"]

#: (stage, observer, from, to), in the order a job and its runner go through them. Each
#: stage from ``queued`` to ``job_started`` starts at the moment the one before it ends, so
#: they add up to "job queued (GitHub) -> the EphemeralRunner's status names the job (as the
#: reconciler's cache receives it)" (``docs/benchmarks/stages.md``).
STAGES: Final[tuple[tuple[str, Observer, str, str], ...]] = (
    ("queued", "listener", "job queued (GitHub)", "job assigned to the scale set (GitHub)"),
    (
        "scale_requested",
        "listener",
        "job assigned (GitHub)",
        "the listener sends the ERS patch asking for its runner (its stamp)",
    ),
    (
        "runner_created",
        "reconciler",
        "the listener sends the ERS patch (its stamp, else the patch seen)",
        "EphemeralRunner created",
    ),
    ("jit_config", "reconciler", "EphemeralRunner created", "JIT config Secret created"),
    ("pod_created", "reconciler", "JIT config Secret created", "runner Pod created"),
    ("pod_scheduled", "reconciler", "Pod created", "Pod bound to a node"),
    ("containers_running", "reconciler", "Pod bound", "runner container running"),
    ("runner_registered", "reconciler", "runner container running", "Pod Ready"),
    ("job_started", "reconciler", "Pod Ready", "EphemeralRunner status names its job (seen)"),
    ("start_reported", "listener", "job started (GitHub)", "the listener's runner status patch"),
    ("job_finished", "listener", "job started (GitHub)", "job finished (GitHub)"),
    ("runner_gone", "reconciler", "runner container terminated", "EphemeralRunner released"),
)
STAGE_NAMES: Final = tuple(stage for stage, *_ in STAGES)
#: The contiguous chain: its sum is "job queued -> the EphemeralRunner's status names the job".
#: ``start_reported`` is the part of ``job_started`` after GitHub's start up to the listener's
#: status patch (the JobStarted message's way to the listener); the chain less it is "job
#: queued -> job started (GitHub)" plus the status patch's way to the reconciler's cache.
TO_JOB_STARTED: Final = STAGE_NAMES[: STAGE_NAMES.index("job_started") + 1]
REPORTED_AFTER_START: Final = "start_reported"
LISTENER_STAGES: Final = frozenset(s for s, who, *_ in STAGES if who == "listener")
RECONCILER_STAGES: Final = frozenset(s for s, who, *_ in STAGES if who == "reconciler")

#: On an EphemeralRunnerSet: ``<patchID>@<epoch seconds, ms>``, the listener's wall clock when
#: it sent the scale patch with that patchID, in the same merge patch (ADR 0065). It ends the
#: job's ``scale_requested`` and starts the ``runner_created`` of the runners made for that
#: patchID, so the patch's way through the API server and the watch is inside a stage.
ANNOTATION_SCALE_REQUESTED_AT: Final = "arcflow.io/scale-requested-at"
#: A stamp older than this when the reconciler first sees its patchID is not that request's
#: send time (a hand edit, a restored object, a clock far behind): the seen time is used.
MAX_REQUEST_STAMP_AGE: Final = 120.0


def request_stamp(patch_id: int, at: float) -> str:
    """The annotation value for the scale patch ``patch_id`` sent at ``at`` (epoch seconds,
    kept to the millisecond: pass ``round(at, 3)`` to end ``scale_requested`` at it)."""
    return f"{int(patch_id)}@{at:.3f}"


def parse_request_stamp(value: object) -> tuple[int, float] | None:
    """(patchID, epoch seconds) of an annotation value, ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    patch, sep, at = value.partition("@")
    try:
        parsed = (int(patch), float(at))
    except ValueError:
        return None
    if not sep or not math.isfinite(parsed[1]):
        return None
    return parsed


def request_start(stamp: object, patch_id: int, seen: float) -> float:
    """When the scale request ``patch_id`` began, for a reconciler that first saw it at
    ``seen``: the listener's stamp when it names this patchID and lies in
    ``[seen - MAX_REQUEST_STAMP_AGE, seen]``; otherwise (no stamp, another patchID's, a time
    in the future or implausibly old: clock skew or a hand edit) ``seen``."""
    parsed = parse_request_stamp(stamp)
    if parsed is None or parsed[0] != patch_id:
        return seen
    at = parsed[1]
    if at > seen or seen - at > MAX_REQUEST_STAMP_AGE:
        return seen
    return at


#: From 50 ms to an hour: Kubernetes stages take tens of milliseconds, an image pull minutes.
STAGE_BUCKETS: Final[tuple[float, ...]] = (
    0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450,
    600, 900, 1200, 1800, 3600,
)  # fmt: skip

__all__ = [
    "ANNOTATION_SCALE_REQUESTED_AT",
    "LABEL_STAGE",
    "LABEL_VARIANT",
    "LISTENER_STAGES",
    "MAX_REQUEST_STAMP_AGE",
    "RECONCILER_STAGES",
    "REPORTED_AFTER_START",
    "STAGES",
    "STAGE_BUCKETS",
    "STAGE_DESCRIPTION",
    "STAGE_LABELS",
    "STAGE_METRIC",
    "STAGE_NAMES",
    "TO_JOB_STARTED",
    "parse_request_stamp",
    "request_stamp",
    "request_start",
]
