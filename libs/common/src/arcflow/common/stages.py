"""The stages of a runner's life, as ``arcflow_runner_stage_seconds{stage=...}`` reports them
(docs/operations.md#runner-stages, ADR 0065). Pure: names, order and who observes each.

One histogram family, exported by whichever process sees both ends of a stage: the listener
for the stages that start or end at one of GitHub's job times, the reconciler for the stages
between a scale request it serves and the runner that request made being gone. Every series
carries upstream's scale-set labels (``name`` is the EphemeralRunnerSet, ``namespace``,
``enterprise``, ``organization``, ``repository``) plus ``variant``.
"""

from __future__ import annotations

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

#: (stage, observer, from, to), in the order a job and its runner go through them. The
#: stages from ``queued`` to ``job_started`` add up to "job queued -> job started".
STAGES: Final[tuple[tuple[str, Observer, str, str], ...]] = (
    ("queued", "listener", "job queued (GitHub)", "job assigned to the scale set (GitHub)"),
    ("scale_requested", "listener", "job assigned (GitHub)", "the listener's ERS patch"),
    ("runner_created", "reconciler", "ERS scale request seen", "EphemeralRunner created"),
    ("jit_config", "reconciler", "EphemeralRunner created", "JIT config Secret created"),
    ("pod_created", "reconciler", "JIT config Secret created", "runner Pod created"),
    ("pod_scheduled", "reconciler", "Pod created", "Pod bound to a node"),
    ("containers_running", "reconciler", "Pod bound", "runner container running"),
    ("runner_registered", "reconciler", "runner container running", "Pod Ready"),
    ("job_started", "reconciler", "Pod Ready", "EphemeralRunner status names its job"),
    ("start_reported", "listener", "job started (GitHub)", "the listener's runner status patch"),
    ("job_finished", "listener", "job started (GitHub)", "job finished (GitHub)"),
    ("runner_gone", "reconciler", "runner container terminated", "EphemeralRunner released"),
)
STAGE_NAMES: Final = tuple(stage for stage, *_ in STAGES)
#: The stages whose sum is "job queued -> job started" as Kubernetes learns it; less
#: ``start_reported`` (the part of ``job_started`` after GitHub's start: the JobStarted
#: message's way to the listener and its status patch) it is "job queued -> job started" by
#: GitHub's clock (``docs/benchmarks/stages.md``).
TO_JOB_STARTED: Final = STAGE_NAMES[: STAGE_NAMES.index("job_started") + 1]
REPORTED_AFTER_START: Final = "start_reported"
LISTENER_STAGES: Final = frozenset(s for s, who, *_ in STAGES if who == "listener")
RECONCILER_STAGES: Final = frozenset(s for s, who, *_ in STAGES if who == "reconciler")

#: From 50 ms to an hour: Kubernetes stages take tens of milliseconds, an image pull minutes.
STAGE_BUCKETS: Final[tuple[float, ...]] = (
    0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 450,
    600, 900, 1200, 1800, 3600,
)  # fmt: skip

__all__ = [
    "LABEL_STAGE",
    "LABEL_VARIANT",
    "LISTENER_STAGES",
    "RECONCILER_STAGES",
    "REPORTED_AFTER_START",
    "STAGES",
    "STAGE_BUCKETS",
    "STAGE_DESCRIPTION",
    "STAGE_LABELS",
    "STAGE_METRIC",
    "STAGE_NAMES",
    "TO_JOB_STARTED",
]
