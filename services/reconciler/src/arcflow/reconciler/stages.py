"""The reconciler's half of the runner stage breakdown (ADR 0065, docs/reconciler.md#runner-stages).

The reconciler sees the Kubernetes side of a runner's life: the scale request it serves, the
EphemeralRunner, JIT Secret and Pod it creates (its own writes) and the Pod's conditions and
container states and the runner's status as its watch-fed cache receives them
(:meth:`StageClock.observe_object`, called for every change before any reconcile pass, so a
busy work queue does not delay a mark). Each moment is this process's wall clock when it made
the write or its cache received the change (an object's timestamps have whole-second
resolution and most of these stages take less); each stage is observed once per runner, into
``arcflow_runner_stage_seconds``.

A scale request starts when the listener sent it: its ERS patch carries that moment for its
patchID (``arcflow.io/scale-requested-at``; :func:`arcflow.common.stages.request_start`
checks it against the moment this replica first saw the patchID and falls back to that). A
runner's ``runner_created`` starts at the request that first asked for it: a request whose
``replicas`` exceed the set's unfinished runners (as this replica knows them: the ones it
created and the ones its cache showed, less those seen terminated, done or deleting) plus the
runners already waiting adds the difference, with its start, to the set's waiting runners,
and each runner created takes the oldest (first in, first out). A runner asked for by one
request but created only at a later one (the earlier pass created nothing because a
finished runner still counted, or a capacity cap held it back) so shows that wait in its
``runner_created`` instead of in no stage. A runner whose end this replica did not see stays
counted, so that error makes starts later (the fallback below), never earlier. A runner with
no entry (a replacement, a
restarted replica) starts at the request named by its own ``patch-id`` annotation. So the
patch's way through the API server and the watch is inside ``runner_created`` and the stages
from ``queued`` to ``job_started`` are contiguous.

Marks live in memory per runner and go when the runner is released; a replica that did not
see a stage's start (another replica created the runner, or a restart) observes nothing for
it. Bounded: at most ``limit`` runners are followed at once (the oldest dropped).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arcflow.common.constants import ANNOTATION_PATCH_ID, LABEL_EPHEMERAL_RUNNER, RUNNER_CONTAINER
from arcflow.common.stages import ANNOTATION_SCALE_REQUESTED_AT, LABEL_STAGE, request_start
from arcflow.reconciler.metrics import variant_labels

Manifest = Mapping[str, Any]
Record = Callable[[float, dict[str, str]], None]

#: The runner's moments, in order; a stage is named after the moment that ends it.
_ORDER = (
    "requested",
    "runner_created",
    "jit_config",
    "pod_created",
    "pod_scheduled",
    "containers_running",
    "runner_registered",
    "job_started",
)


def _pod_condition(pod: Manifest, kind: str) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False


def _runner_state(pod: Manifest) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == RUNNER_CONTAINER:
            return status.get("state") or {}
    return {}


def pod_moments(pod: Manifest) -> set[str]:
    """Which of the pod's moments its manifest shows (pure)."""
    seen: set[str] = set()
    if (pod.get("spec") or {}).get("nodeName") or _pod_condition(pod, "PodScheduled"):
        seen.add("pod_scheduled")
    state = _runner_state(pod)
    if "running" in state or "terminated" in state:
        seen.add("containers_running")
    if ("running" in state and _pod_condition(pod, "Ready")) or "terminated" in state:
        seen.add("runner_registered")
    if "terminated" in state:
        seen.add("terminated")
    return seen


@dataclass
class _Runner:
    labels: dict[str, str]
    at: dict[str, float] = field(default_factory=dict)


@dataclass
class _Demand:
    """A set's runners as this replica knows them: the unfinished ones, and the start of each
    runner asked for and not created yet, oldest first."""

    unfinished: set[tuple[str, str]] = field(default_factory=set)
    waiting: deque[float] = field(default_factory=deque)

    def request(self, replicas: int, start: float, limit: int) -> None:
        room = max(0, min(replicas, limit) - len(self.unfinished))
        if room > len(self.waiting):
            self.waiting.extend([start] * (room - len(self.waiting)))
        # No more runners can be waiting than the set lacks (fewer jobs, cancelled ones):
        # the oldest entries go.
        while len(self.waiting) > room:
            self.waiting.popleft()


@dataclass
class StageClock:
    """Per runner: when each moment was first seen; a stage observed once both ends are."""

    record: Record | None = None
    clock: Callable[[], float] = time.time
    limit: int = 20_000
    #: ERS uid -> patchID -> when that scale request began (the newest ``history`` kept).
    requests: dict[str, OrderedDict[int, float]] = field(default_factory=dict)
    runners: OrderedDict[tuple[str, str], _Runner] = field(default_factory=OrderedDict)
    history: int = 32
    #: ERS uid -> (patchID, stamp) of the request the set holds, as last seen.
    latest: dict[str, tuple[int, object]] = field(default_factory=dict)
    #: ERS uid -> its runners and waiting requests (from the cache's sets and runners).
    demand: dict[str, _Demand] = field(default_factory=dict)
    #: (namespace, runner name) -> (its ERS uid, finished), the newest ``limit`` runners.
    member_of: OrderedDict[tuple[str, str], tuple[str, bool]] = field(default_factory=OrderedDict)

    def request_seen(
        self, ers_uid: str, patch_id: int, stamp: object = None, replicas: int | None = None
    ) -> None:
        """The set's scale request as this replica sees it: ``patch_id``, the set's
        ``scale-requested-at`` annotation ``stamp`` and its ``replicas`` (``None``: not
        known to the caller). A request is new when its patchID or its stamp changed (every
        listener send has a new stamp: patchID 0 again at idle, or the first request of a
        restarted listener, is new too); a change of anything else is the same request."""
        latest = self.latest.get(ers_uid)
        if latest is not None and latest[0] == patch_id and stamp in (None, latest[1]):
            return
        self.latest[ers_uid] = (patch_id, stamp)
        known = self.requests.setdefault(ers_uid, OrderedDict())
        known.pop(patch_id, None)
        start = known[patch_id] = request_start(stamp, patch_id, self.clock())
        while len(known) > self.history:
            known.popitem(last=False)
        if replicas is not None:
            self.demand.setdefault(ers_uid, _Demand()).request(replicas, start, self.limit)

    def runner_created(
        self, er: Manifest, ers_uid: str, labels: Mapping[str, str], ers_name: str
    ) -> None:
        """The reconciler created ``er`` for its set: it starts at the oldest unserved
        request, else at the request its ``patch-id`` annotation names."""
        meta = er.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        runner = _Runner(self._labels(key[0], ers_name, labels))
        demand = self.demand.setdefault(ers_uid, _Demand())
        start: float | None = None
        if demand.waiting:
            start = demand.waiting.popleft()
        else:
            known = self.requests.get(ers_uid) or OrderedDict()
            try:
                patch_id: int | None = int((meta.get("annotations") or {})[ANNOTATION_PATCH_ID])
            except (KeyError, TypeError, ValueError):
                patch_id = next(reversed(known), None)  # no annotation: the newest request
            start = known.get(patch_id) if patch_id is not None else None
        if start is not None:
            runner.at["requested"] = start
        self._member(ers_uid, key)
        self.runners[key] = runner
        self.runners.move_to_end(key)
        while len(self.runners) > self.limit:
            self.runners.popitem(last=False)
        self._mark(runner, "runner_created")

    def mark(self, namespace: str, name: str, moment: str) -> None:
        runner = self.runners.get((namespace, name))
        if runner is not None:
            self._mark(runner, moment)

    def pod_created(self, namespace: str, name: str) -> None:
        """A (new) runner pod: the pod's own moments start again (a recreated pod)."""
        runner = self.runners.get((namespace, name))
        if runner is None:
            return
        for moment in ("pod_scheduled", "containers_running", "runner_registered", "terminated"):
            runner.at.pop(moment, None)
        uid, finished = self.member_of.get((namespace, name), ("", False))
        if finished and uid:  # its pod failed and is made again: the runner is not done
            self.member_of[(namespace, name)] = (uid, False)
            self.demand.setdefault(uid, _Demand()).unfinished.add((namespace, name))
        runner.at.pop("pod_created", None)
        self._mark(runner, "pod_created")

    def observe(self, namespace: str, name: str, pod: Manifest | None, has_job: bool) -> None:
        """What the cache shows of the runner's pod and status now."""
        runner = self.runners.get((namespace, name))
        if runner is None:
            return
        # A pod seen before its create returned (the cache has it first) waits for that mark.
        created = "pod_created" in runner.at
        moments = pod_moments(pod) if pod is not None and created else set()
        for moment in ("pod_scheduled", "containers_running", "runner_registered"):
            if moment in moments:
                self._mark(runner, moment)
        if has_job:
            if created:
                # A runner that took a job was bound, ran and registered: what the cache
                # has not shown yet (the pod's status lagging the job) ends no later than now,
                # so the chain to ``job_started`` has no hole.
                for moment in ("pod_scheduled", "containers_running", "runner_registered"):
                    self._mark(runner, moment)
            self._mark(runner, "job_started")
        if "terminated" in moments and "terminated" not in runner.at:
            runner.at["terminated"] = self.clock()
            self._finished((namespace, name))

    def observe_object(self, kind: str, obj: Manifest) -> None:
        """A change as the cache receives it (before any reconcile pass, so a busy work queue
        does not delay the marks): a runner Pod's moments, a runner's job, a set's request."""
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if kind == "Pod":
            if (meta.get("labels") or {}).get(LABEL_EPHEMERAL_RUNNER) == "True":
                if "terminated" in pod_moments(obj):
                    self._finished((namespace, name))
                self.observe(namespace, name, obj, has_job=False)
        elif kind == "EphemeralRunner":
            status = obj.get("status") or {}
            if status.get("jobId") or status.get("jobRequestId"):
                self.observe(namespace, name, None, has_job=True)
            owner = next(
                (
                    str(ref.get("uid") or "")
                    for ref in meta.get("ownerReferences") or []
                    if ref.get("kind") == "EphemeralRunnerSet"
                ),
                "",
            )
            if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
                self._finished((namespace, name))
            elif owner and (namespace, name) not in self.member_of:
                self._member(owner, (namespace, name))
        elif kind == "EphemeralRunnerSet":
            patch_id = int((obj.get("spec") or {}).get("patchID") or 0)
            stamp = (meta.get("annotations") or {}).get(ANNOTATION_SCALE_REQUESTED_AT)
            replicas = int((obj.get("spec") or {}).get("replicas") or 0)
            self.request_seen(str(meta.get("uid") or ""), patch_id, stamp, replicas)

    def runner_gone(self, namespace: str, name: str) -> None:
        """The runner was released (its finalizers removed): ``runner_gone``, then forget it."""
        self._finished((namespace, name))
        runner = self.runners.pop((namespace, name), None)
        if runner is None:
            return
        ended = runner.at.get("terminated")
        if ended is not None:
            self._observe(runner, "runner_gone", self.clock() - ended)

    def _member(self, ers_uid: str, key: tuple[str, str]) -> None:
        """An unfinished runner of the set (once: a finished one stays finished)."""
        if key in self.member_of:
            return
        self.demand.setdefault(ers_uid, _Demand()).unfinished.add(key)
        self.member_of[key] = (ers_uid, False)
        while len(self.member_of) > self.limit:
            self._forget(*self.member_of.popitem(last=False))

    def _finished(self, key: tuple[str, str]) -> None:
        uid, _ = self.member_of.pop(key, ("", True))
        self._forget(key, (uid, False))
        self.member_of[key] = (uid, True)
        while len(self.member_of) > self.limit:
            self._forget(*self.member_of.popitem(last=False))

    def _forget(self, key: tuple[str, str], entry: tuple[str, bool]) -> None:
        uid, finished = entry
        if not finished and uid in self.demand:
            self.demand[uid].unfinished.discard(key)

    def _mark(self, runner: _Runner, moment: str) -> None:
        if moment in runner.at:
            return
        now = self.clock()
        runner.at[moment] = now
        previous = _ORDER[_ORDER.index(moment) - 1]
        start = runner.at.get(previous)
        if start is not None:
            self._observe(runner, moment, now - start)

    def _observe(self, runner: _Runner, stage: str, seconds: float) -> None:
        if self.record is not None:
            self.record(max(0.0, seconds), {**runner.labels, LABEL_STAGE: stage})

    @staticmethod
    def _labels(namespace: str, ers_name: str, labels: Mapping[str, str]) -> dict[str, str]:
        return variant_labels(ers_name, namespace, labels)


__all__ = ["StageClock", "pod_moments"]
