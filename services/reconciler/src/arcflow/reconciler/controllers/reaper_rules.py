"""Pure rules of the runner pod reaper (ADR 0065, docs/reconciler.md#stuck-runner-pods).

A runner pod that sits in one start-up stage past that stage's deadline is stuck: the kubelet
or the scheduler will retry forever (an image that never pulls backs off up to five minutes
between attempts and never gives up; an unschedulable pod stays Pending), and the job the
runner was made for waits with it. The reconciler then deletes the pod and records a failure,
so the EphemeralRunner makes a new one within upstream's failure budget
(docs/upstream-behaviour.md#runner-controller), with a Warning Event naming the stage.

Stages, from the pod's status alone (no Node read):

* ``Pending``: not bound to a node (no ``spec.nodeName``, ``PodScheduled`` not True), since the
  pod was created;
* ``ImagePull``: a container (init or not) waiting with ``ErrImagePull``, ``ImagePullBackOff``,
  ``ErrImageNeverPull``, ``InvalidImageName`` or ``RegistryUnavailable``, since the pod started;
* ``Init``: an init container not done (``Initialized`` not True), since the pod started;
* ``ContainerCreating``: the runner container waiting to be created, since init finished;
* ``NodeLost``: the pod is on a node the control plane gave up on: ``status.reason``
  ``NodeLost``, or the runner container running while the pod is not Ready (the node lifecycle
  controller marks the pods of a NotReady node so; a runner container has no readiness probe),
  for longer than the grace period.

Deadlines: defaults from the reconciler's settings, replaced key by key by the ARS annotation
``arcflow.dev/runner-deadlines`` (``pending=10m,imagePull=5m,init=10m,containerCreating=5m,
nodeLost=1m``; seconds, or a number with ``s``/``m``/``h``), and for one variant by
``arcflow.dev/runner-deadlines.<variant>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from arcflow.common.models import ContainerStatus, Pod
from arcflow.common.timestamps import parse_kube_time

Stage = Literal["Pending", "ImagePull", "Init", "ContainerCreating", "NodeLost"]
ANNOTATION_DEADLINES: Final = "arcflow.dev/runner-deadlines"
IMAGE_PULL_REASONS: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "RegistryUnavailable",
    }
)
CREATING_REASONS: Final = frozenset({"ContainerCreating", "PodInitializing"})
_KEYS: Final = {
    "pending": "pending",
    "imagepull": "image_pull",
    "init": "init",
    "containercreating": "container_creating",
    "nodelost": "node_lost",
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class DeadlineSyntaxError(ValueError):
    """An annotation that does not parse (the message names the bad entry, nothing else)."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Seconds a runner pod may spend in each stage; 0 turns a stage's deadline off."""

    pending: float = 600.0
    image_pull: float = 300.0
    init: float = 600.0
    container_creating: float = 300.0
    node_lost: float = 60.0

    def of(self, stage: Stage) -> float:
        return {
            "Pending": self.pending,
            "ImagePull": self.image_pull,
            "Init": self.init,
            "ContainerCreating": self.container_creating,
            "NodeLost": self.node_lost,
        }[stage]


def parse_deadlines(text: str, base: Deadlines) -> Deadlines:
    """``key=duration`` entries, comma-separated, over ``base``; raises DeadlineSyntaxError."""
    changes: dict[str, float] = {}
    for entry in (e for e in text.split(",") if e.strip()):
        key, sep, value = entry.partition("=")
        field = _KEYS.get(key.strip().replace("_", "").replace("-", "").lower())
        match = _DURATION.match(value)
        if not sep or field is None or match is None:
            raise DeadlineSyntaxError(f"bad entry {entry.strip()!r} (want e.g. imagePull=5m)")
        changes[field] = float(match.group(1)) * _UNIT[match.group(2)]
    return replace(base, **changes)


def deadlines_for(
    annotations: Mapping[str, str], variant: str, base: Deadlines
) -> tuple[Deadlines, str | None]:
    """The set's deadlines (the ARS annotation, then the variant's), and the error of an
    annotation that does not parse (that annotation is then ignored)."""
    deadlines, error = base, None
    keys = [ANNOTATION_DEADLINES] + ([f"{ANNOTATION_DEADLINES}.{variant}"] if variant else [])
    for key in keys:
        text = annotations.get(key)
        if not text:
            continue
        try:
            deadlines = parse_deadlines(text, deadlines)
        except DeadlineSyntaxError as exc:
            error = f"annotation {key}: {exc}"
    return deadlines, error


@dataclass(frozen=True, slots=True)
class Stuck:
    """A pod past a stage's deadline."""

    stage: Stage
    reason: str
    seconds: float
    deadline: float

    @property
    def message(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return (
            f"runner pod stuck in {self.stage}{why} for {self.seconds:.0f}s, past its "
            f"{self.deadline:g}s deadline: deleted, the runner makes a new one"
        )


def _time(value: Any) -> float | None:
    parsed = parse_kube_time(value)
    return None if parsed is None else parsed.timestamp()


def _waiting(statuses: list[ContainerStatus]) -> list[str]:
    """The reasons of the containers that wait (a ``waiting: {}`` says nothing: skipped)."""
    return [
        s.state.waiting.reason
        for s in statuses
        if s.state.waiting is not None
        and (s.state.waiting.model_fields_set or s.state.waiting.model_extra)
    ]


def pod_stage(pod: Pod) -> tuple[Stage, str, float | None] | None:
    """The start-up stage a runner pod is in (stage, the kubelet's reason, since when in epoch
    seconds), or ``None`` for a pod past start-up (running, finished, being deleted)."""
    if pod.is_deleting:
        return None
    status = pod.status
    phase = status.phase or "Pending"
    created = _time(pod.metadata.creation_timestamp)
    started = _time(status.start_time) or created
    if phase == "Running" or phase in ("Succeeded", "Failed"):
        if phase == "Running":
            return _node_lost(pod)
        return None
    if not pod.spec.node_name and not status.is_true("PodScheduled"):
        scheduled = status.condition("PodScheduled")
        return "Pending", scheduled.reason if scheduled else "", created
    init_waiting = _waiting(status.init_container_statuses)
    main_waiting = _waiting(status.container_statuses)
    for reason in (*init_waiting, *main_waiting):
        if reason in IMAGE_PULL_REASONS:
            return "ImagePull", reason, started
    if status.init_container_statuses and not status.is_true("Initialized"):
        return "Init", next(iter(init_waiting), ""), started
    initialized = status.condition("Initialized")
    since = _time(initialized.last_transition_time if initialized else None) or started
    return "ContainerCreating", next(iter(main_waiting), "ContainerCreating"), since


def _node_lost(pod: Pod) -> tuple[Stage, str, float | None] | None:
    status = pod.status
    if status.reason == "NodeLost":
        return "NodeLost", "NodeLost", None
    state = pod.runner_state
    running = state is not None and state.running is not None
    ready = status.condition("Ready")
    if running and ready is not None and ready.status != "True":
        return "NodeLost", "NodeNotReady", _time(ready.last_transition_time)
    return None


def stuck(pod: Pod, now: float, deadlines: Deadlines) -> Stuck | None:
    """The pod's stage when it is past its deadline, else ``None``."""
    found = pod_stage(pod)
    if found is None:
        return None
    stage, reason, since = found
    deadline = deadlines.of(stage)
    if deadline <= 0:
        return None
    if since is None:  # NodeLost said by the control plane itself: no grace left to give
        return Stuck(stage, reason, 0.0, deadline)
    seconds = now - since
    return Stuck(stage, reason, seconds, deadline) if seconds >= deadline else None


def recheck_after(pod: Pod, now: float, deadlines: Deadlines) -> float | None:
    """Seconds until the pod's current stage reaches its deadline (``None``: nothing to wait
    for), so the reconciler looks again then even if nothing else changes."""
    found = pod_stage(pod)
    if found is None or found[2] is None:
        return None
    deadline = deadlines.of(found[0])
    if deadline <= 0:
        return None
    return max(0.0, found[2] + deadline - now)


__all__ = [
    "ANNOTATION_DEADLINES",
    "DeadlineSyntaxError",
    "Deadlines",
    "Stuck",
    "deadlines_for",
    "parse_deadlines",
    "pod_stage",
    "recheck_after",
    "stuck",
]
