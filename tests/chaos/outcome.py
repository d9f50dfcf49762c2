"""The burst every chaos test runs and the figures a user cares about after it.

A burst queues jobs round-robin over the three variants. The outcome is read from the
world, never from what a service says it did: the Actions simulator (job states, attempts,
scale sets, registered runners), the pod runner (which runner pod took which job) and the
Kubernetes API (what objects are left).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from arcflow.common.kube import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET, POD, SECRET
from tests.chaos.harness import SECRET_NAME, ChaosStack
from tests.chaos.secret_scan import scan

#: Converged: the steady state is reached this soon after the last fault, restart or job. On
#: the real control plane a quiet machine converges in about 7 s (garbage collection and pod
#: deletion are asynchronous there); the bound leaves room for a loaded CI machine (11-13 s
#: seen at load 6 on 2 cores) and still fails a scenario that does not settle.
CONVERGE_SECONDS = 20.0


@dataclass
class Burst:
    stack: ChaosStack
    jobs: dict[str, str] = field(default_factory=dict)  # job id -> variant

    def enqueue(self, count: int, *, duration: float = 0.3) -> list[str]:
        assert self.stack.sim is not None
        targets = self.stack.targets
        added = []
        for index in range(count):
            target = targets[index % len(targets)]
            job_id = self.stack.sim.enqueue_job(
                target.job_labels, duration=duration, display_name=f"chaos {target.variant}"
            )
            self.jobs[job_id] = target.variant
            added.append(job_id)
        return added

    def completed(self) -> int:
        assert self.stack.sim is not None
        engine = self.stack.sim.engine
        return sum(1 for j in self.jobs if engine.job(j).state.value == "completed")

    async def wait_completed(self, count: int, *, within: float) -> None:
        began = time.monotonic()
        while self.completed() < count:
            if time.monotonic() - began > within:
                raise AssertionError(
                    f"{self.completed()}/{len(self.jobs)} jobs completed after {within}s "
                    f"(wanted {count}); services {self.stack.service_states()}; "
                    f"not completed: {self.stuck()[:5]}"
                )
            await asyncio.sleep(0.1)

    def stuck(self) -> list[dict[str, object]]:
        """What the simulator and the pod runner know of each job not completed yet."""
        assert self.stack.sim is not None
        assert self.stack.pod_runner is not None
        engine = self.stack.sim.engine
        pods: dict[str, list[str]] = {}
        for record in self.stack.pod_runner.records.values():
            if record.job_id is not None:
                pods.setdefault(record.job_id, []).append(record.name)
        found: list[dict[str, object]] = []
        for job_id, variant in self.jobs.items():
            job = engine.job(job_id)
            if job.state.value != "completed":
                found.append(
                    {
                        "job": job_id,
                        "variant": variant,
                        "state": job.state.value,
                        "scale_set": job.scale_set_id,
                        "runner": job.runner_name or None,
                        "pods": pods.get(job_id, []),
                    }
                )
        return found

    def last_finish(self) -> float:
        """Wall-clock time the last job finished (``time.time()`` scale)."""
        assert self.stack.sim is not None
        engine = self.stack.sim.engine
        finished = [engine.job(j).finish_time for j in self.jobs]
        return max(f.timestamp() for f in finished if f is not None)


@dataclass
class Figures:
    """What the user cares about; every count here must be 0 (see :meth:`problems`)."""

    jobs: int
    lost: list[str]
    run_twice: list[str]
    duplicate_scale_sets: list[str]
    orphans: list[str]
    dead_services: list[str]
    converge_seconds: float
    restarts: dict[str, int]
    secrets_found: list[str] = field(default_factory=list)
    scanned: dict[str, int] = field(default_factory=dict)
    secrets_issued: dict[str, int] = field(default_factory=dict)
    #: Seconds after the reference event -> leftovers by kind, at each change.
    converge_trace: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    def problems(self) -> list[str]:
        found = []
        for label, items in (
            ("jobs lost", self.lost),
            ("jobs run twice", self.run_twice),
            ("duplicate scale sets", self.duplicate_scale_sets),
            ("orphans", self.orphans),
            ("dead or wedged services", self.dead_services),
            ("secrets found", self.secrets_found),
        ):
            if items:
                found.append(f"{len(items)} {label}: {items[:10]}")
        if self.converge_seconds == float("inf"):
            found.append("never converged (wait_converged gave up)")
        elif not self.converged_in_target():
            found.append(f"converged {self.converge_seconds:.1f}s after the last event")
        return found

    def converged_in_target(self) -> bool:
        """Whether the steady state came within :data:`CONVERGE_SECONDS`."""
        return self.converge_seconds <= CONVERGE_SECONDS


def lost_and_twice(burst: Burst) -> tuple[list[str], list[str]]:
    """Jobs that did not complete successfully, and jobs more than one runner took."""
    stack = burst.stack
    assert stack.sim is not None
    assert stack.pod_runner is not None
    engine = stack.sim.engine
    lost = [
        j
        for j in burst.jobs
        if engine.job(j).state.value != "completed" or engine.job(j).final_result != "succeeded"
    ]
    pods_per_job = Counter(
        r.job_id for r in stack.pod_runner.records.values() if r.job_id in burst.jobs
    )
    twice = sorted(j for j in burst.jobs if pods_per_job.get(j, 0) > 1 or engine.job(j).attempt > 1)
    return lost, twice


def duplicate_scale_sets(stack: ChaosStack) -> list[str]:
    names = Counter(s["name"] for s in stack.scale_sets())
    dupes = [f"{name} x{n}" for name, n in names.items() if n > 1]
    expected = {t.scale_set_name for t in stack.targets}
    missing = [f"{name} missing" for name in sorted(expected - set(names))]
    return dupes + missing


async def leftovers(stack: ChaosStack) -> list[str]:
    """What is left once every job is done and no runner is wanted (minRunners 0):
    EphemeralRunners, runner Pods, Secrets that are not the credentials or the listener's,
    ERS still asking for replicas, runners still registered with GitHub; plus any object whose
    owner is gone."""
    assert stack.kube is not None
    assert stack.sim is not None
    kube = stack.kube
    found: list[str] = []
    runner_sets = (await kube.list(EPHEMERAL_RUNNER_SET, namespace=stack.namespace)).items
    runners = (await kube.list(EPHEMERAL_RUNNER, namespace=stack.namespace)).items
    pods = (await kube.list(POD, namespace=stack.namespace)).items
    secrets = (await kube.list(SECRET, namespace=stack.namespace)).items
    uids = {str(o["metadata"]["uid"]) for o in [*runner_sets, *runners, *pods, *secrets]}
    for ers in runner_sets:
        replicas = int((ers.get("spec") or {}).get("replicas") or 0)
        if replicas:
            found.append(f"ERS {ers['metadata']['name']} replicas={replicas}")
    found += [f"EphemeralRunner {r['metadata']['name']}" for r in runners]
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get("actions-ephemeral-runner") == "True":
            found.append(f"runner Pod {pod['metadata']['name']}")
    for obj in [*pods, *secrets]:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("kind") in ("EphemeralRunner", "Pod", "Secret") and ref["uid"] not in uids:
                found.append(f"{obj['kind']} {obj['metadata']['name']} (owner gone)")
    for secret in secrets:
        name = str(secret["metadata"]["name"])
        if name != SECRET_NAME and not (secret["metadata"].get("ownerReferences")):
            found.append(f"Secret {name} (no owner)")
    runners_registered = sum(stack.sim.stats()["runners"].values())
    if runners_registered:
        found.append(f"{runners_registered} runners registered with GitHub")
    return found


def _kinds(left: list[str]) -> dict[str, int]:
    """Leftovers counted by what they are ("EphemeralRunner", "runner Pod", ...); an ERS still
    asking for replicas is named, with its count (there are few)."""
    kinds: Counter[str] = Counter()
    for item in left:
        if item.startswith("ERS "):
            kinds[item] += 1
        elif item.startswith("runner "):
            kinds[" ".join(item.split()[:2])] += 1
        else:
            kinds[item.split()[0]] += 1
    return dict(kinds)


async def wait_converged(
    stack: ChaosStack,
    *,
    within: float = 60.0,
    trace: list[tuple[float, dict[str, int]]] | None = None,
) -> tuple[float, list[str]]:
    """Poll :func:`leftovers` until empty; returns (monotonic time it was, last leftovers).
    ``trace`` gets (monotonic time, leftovers by kind) each time that count changes, so a
    slow convergence shows what stayed longest."""
    began = time.monotonic()
    left: list[str] = []
    while time.monotonic() - began < within:
        left = await leftovers(stack)
        kinds = _kinds(left)
        if trace is not None and (not trace or trace[-1][1] != kinds):
            trace.append((time.monotonic(), kinds))
        if not left:
            return time.monotonic(), []
        await asyncio.sleep(0.1)
    return time.monotonic(), left


async def dead_or_wedged(stack: ChaosStack, *, probe_jobs: int = 3) -> list[str]:
    """A service whose process is gone or whose ``/healthz`` fails, a listener that has no
    process; then a probe: one more job per variant must complete (a wedged consumer would
    let it sit)."""
    problems = [f"{name} not healthy" for name, s in stack.services.items() if not s.healthy()]
    if not stack.listener_pids():
        problems.append("no listener process")
    if problems:
        return problems
    probe = Burst(stack)
    probe.enqueue(probe_jobs, duration=0.1)
    try:
        await probe.wait_completed(probe_jobs, within=30.0)
    except AssertionError as exc:
        problems.append(f"probe jobs: {exc}")
    return problems


async def figures_after(burst: Burst, *, last_event: float) -> Figures:
    """Everything a test asserts, once the burst completed. ``last_event`` is the monotonic
    time of the last fault or restart; convergence is measured from it or from the last job
    finishing, whichever is later."""
    stack = burst.stack
    trace: list[tuple[float, dict[str, int]]] = []
    converged_at, left = await wait_converged(stack, trace=trace)
    last_finish_mono = time.monotonic() - (time.time() - burst.last_finish())
    reference = max(last_event, last_finish_mono)
    lost, twice = lost_and_twice(burst)
    dead = await dead_or_wedged(stack)
    report = await scan(stack, stack.secrets)
    return Figures(
        jobs=len(burst.jobs),
        lost=lost,
        run_twice=twice,
        duplicate_scale_sets=duplicate_scale_sets(stack),
        orphans=left,
        dead_services=dead,
        converge_seconds=max(0.0, converged_at - reference) if not left else float("inf"),
        restarts={name: s.restarts for name, s in stack.services.items()},
        secrets_found=report.found,
        scanned=report.scanned,
        secrets_issued=stack.secrets.counts(),
        converge_trace=[(round(t - reference, 2), kinds) for t, kinds in trace],
    )


def describe(figures: Figures) -> dict[str, Any]:
    """The figures as one line for the test log (and docs/reliability.md)."""
    return {
        "jobs": figures.jobs,
        "lost": len(figures.lost),
        "run_twice": len(figures.run_twice),
        "duplicate_scale_sets": len(figures.duplicate_scale_sets),
        "orphans": len(figures.orphans),
        "dead_services": len(figures.dead_services),
        "converge_seconds": round(figures.converge_seconds, 2),
        "converged_within_target": figures.converged_in_target(),
        "restarts": figures.restarts,
        "secrets_found": len(figures.secrets_found),
        "scanned": figures.scanned,
        "secrets_issued": figures.secrets_issued,
        "converge_trace": figures.converge_trace,
    }


async def run_burst(
    stack: ChaosStack,
    faults: list[tuple[str, Callable[[], Awaitable[object]]]],
    *,
    jobs: int = 300,
    within: float = 150.0,
    burst: Burst | None = None,
) -> tuple[Burst, dict[str, float], float]:
    """Queue ``jobs``; run each fault once ``k/(len(faults)+1)`` of them completed (the fault
    coroutine returns once its part is back, e.g. a restarted process is healthy); wait for
    the rest. Returns the burst, seconds each fault took until back, and the monotonic time
    the last one was back. Pass ``burst`` when a fault needs to look at it."""
    burst = burst or Burst(stack)
    burst.enqueue(jobs)
    back_after: dict[str, float] = {}
    for step, (name, fault) in enumerate(faults, start=1):
        await burst.wait_completed(jobs * step // (len(faults) + 1), within=within)
        began = time.monotonic()
        await fault()
        back_after[name] = round(time.monotonic() - began, 2)
    last_event = time.monotonic()
    await burst.wait_completed(jobs, within=within)
    return burst, back_after, last_event


def report(test: str, began: float, back_after: dict[str, float], figures: Figures) -> None:
    """One JSON line per run on stdout (``-s``): the figures docs/reliability.md quotes."""
    line = {"test": test, "seconds": round(time.monotonic() - began, 1), "back_after": back_after}
    print(json.dumps({**line, **describe(figures)}))
