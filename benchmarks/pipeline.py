"""P2 and P6: job queued -> runner pod created -> job started, and API calls per runner.

Not a test. Each run builds a fresh stack (``_stack.Stack``: the services as processes, a
counting proxy per Kubernetes client, the example ARS with 3 variants and no runner cap),
waits for the listener's sessions, resets the counters, then queues jobs (1 s each) round-robin
over the variants:

* ``--mode trickle``: one job every ``--interval`` seconds (default 0.5 s, 40 jobs);
* ``--mode burst``: ``--jobs`` jobs at once (default 200).

It waits until every job completed and every EphemeralRunner and runner pod is gone, then
reports the latency percentiles (queued -> the pod that took the job was created; queued ->
job assigned to a runner), for a burst the time until all runner pods existed, the
Kubernetes API calls per runner lifecycle by client, verb and resource (P6), the JetStream
messages per job and the services' RSS/CPU. Three runs by default; results in
``benchmarks/results/pipeline-<mode>.json``.

    .venv/bin/python benchmarks/pipeline.py --mode trickle
    .venv/bin/python benchmarks/pipeline.py --mode burst
    .venv/bin/python benchmarks/pipeline.py --mode burst --kube apiserver   # + audit counts
    .venv/bin/python benchmarks/pipeline.py --mode burst --kube alternate   # emulator, real, ...
    .venv/bin/python benchmarks/pipeline.py --mode burst --before-rev main  # main, this, ...

``--floor`` (the default for a burst on the real server, ``--kube apiserver`` or ``alternate``):
once per round (before the first side of ``--before-rev``'s pair, shared by both), the floor
of ``_floor.py`` on a fresh control plane of its own (the same
writes for the same number of runners by one plain client, no arcflow service); each run's
JSON gets ``floor_seconds`` beside ``all_pods_created_after_first_enqueue``, their ratio
``all_pods_over_floor`` and the other latencies over the floor (``over_floor``), and the
summary their spread (docs/benchmarks/floor.md). ``--no-floor`` skips it.

``--before-rev REV``: runs alternate between the services of ``REV`` (its ``libs`` and
``services`` exported to a temp folder and put first on the services' ``PYTHONPATH``, as
``one_trigger.py`` does) and this checkout's, ``--runs`` of each; the summary is per side.

On the real server each service runs as its chart's ServiceAccount (``--no-identities``: all
as the admin), so the audit log counts the requests per arcflow identity (watcher, registrar,
reconciler, listener). After the counts, each run deletes the ARS and times until every object
it had made (sets, runners, listener, pods, Secrets, ServiceAccounts, Roles, RoleBindings) is
gone (``deletion``), with the requests the deletion cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nats
from _cpu_timeline import CpuTimeline
from _floor import (
    DEFAULT_CONCURRENCY,
    commit,
    control_plane_cpu,
    control_plane_cpu_since,
    measure_floor,
    ratio,
)
from _pprof import ServerProfile
from _report import wait_quiet
from _stack import (
    CONTROLLER_NAMESPACE,
    Stack,
    loadavg,
    machine,
    nats_counters,
    spread,
    write_result,
)
from _stages import (
    breakdown,
    bucket_quantile,
    passes_between,
    scrape_passes,
    scrape_rpc,
    scrape_stages,
    stage_buckets,
)

from arcflow.common.constants import ANNOTATION_PATCH_ID
from arcflow.common.events import JobsBatch, ScaleDecision, parse_event
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from arcflow.devstack.cluster_objects import COUNTED_KINDS
from arcflow.devstack.demo import percentile


class Hops:
    """P1: GitHub message -> ERS ``spec.patchID`` visible on a watch, split into hops.

    t1 the listener built the first batch that mentions a job request (``occurred_at``);
    t2 the batch arrived here from ``arc.jobs`` (published to JetStream); t3 the next scale
    decision for that set arrived from ``arc.scale``; t4 this harness's own watch saw the
    ERS with that decision's patchID. All clocks are this machine's.
    """

    def __init__(self) -> None:
        self.available: dict[str, tuple[float, float, int]] = {}  # job -> (t1, t2, set id)
        self.decisions: list[tuple[float, int, str, int]] = []  # (t3, set id, ers, patch)
        self.patches: dict[tuple[str, int], float] = {}  # (ers, patchID) -> t4
        self._tasks: list[asyncio.Task[None]] = []
        self.batches = 0
        #: Surplus diagnosis: per decision (t, set, patchID, replicas asked, assigned jobs in
        #: the decision, assigned jobs in the simulator at that moment, statistics' age).
        self.decision_rows: list[dict[str, Any]] = []
        self.batch_times: dict[tuple[int, int], float] = {}  # (set, message id) -> built at
        self.runners_by_patch: dict[tuple[str, int], int] = {}  # (ers, patch-id) -> created
        #: (ers, patch-id) -> (first runner seen at, jobs assigned in the simulator then)
        self.first_runner: dict[tuple[str, int], tuple[float, int]] = {}
        self._set_of_ers: dict[str, int] = {}
        self.runner_seen: dict[str, float] = {}  # EphemeralRunner name -> first seen
        #: Job id -> when this watch first saw an EphemeralRunner status naming it (the end of
        #: the stage chain, docs/benchmarks/stages.md).
        self.job_named: dict[str, float] = {}

    async def start(self, stack: Stack) -> None:
        assert stack.nats is not None
        self.nc = await nats.connect(stack.nats.url)

        async def on_msg(msg: Any) -> None:
            now = time.time()
            try:
                event = parse_event(msg.data)
            except Exception:
                return
            if isinstance(event, JobsBatch):
                self.batches += 1
                self.batch_times[(event.scale_set_id, event.message_id)] = (
                    event.occurred_at.timestamp()
                )
                for job in event.jobs:
                    if job.runner_request_id or job.job_id:
                        # the first batch that mentions a job request: its first message
                        key = f"{event.scale_set_id}:{job.runner_request_id or job.job_id}"
                        self.available.setdefault(
                            key, (event.occurred_at.timestamp(), now, event.scale_set_id)
                        )
            elif isinstance(event, ScaleDecision):
                self.decisions.append(
                    (now, event.scale_set_id, event.ephemeral_runner_set, event.patch_id)
                )
                self._set_of_ers[event.ephemeral_runner_set] = event.scale_set_id
                self._record_decision(stack, event, now)

        await self.nc.subscribe("arc.jobs.>", cb=on_msg)
        await self.nc.subscribe("arc.scale.>", cb=on_msg)
        self._tasks.append(asyncio.create_task(self._watch(stack)))
        self._tasks.append(asyncio.create_task(self._watch_runners(stack)))

    def _record_decision(self, stack: Stack, event: ScaleDecision, now: float) -> None:
        assert stack.simulator is not None
        true = stack.simulator.engine.statistics(event.scale_set_id).total_assigned_jobs
        built = None
        if event.reason.startswith("message "):
            # "message N", "message N (statistics of message M)", either maybe followed by
            # "; ..." (ADR 0043's unpatched batches): the statistics' message
            head = event.reason.split(";")[0]
            source = head.rstrip(")").split()[-1]
            built = self.batch_times.get((event.scale_set_id, int(source)))
        self.decision_rows.append(
            {
                "t": now,
                "set": event.scale_set_id,
                "patch": event.patch_id,
                "replicas": event.desired_replicas,
                "assigned_in_decision": event.assigned_jobs,
                "assigned_now": true,
                "stats_age": None if built is None else round(now - built, 3),
                "reason": event.reason,
            }
        )

    async def _watch_runners(self, stack: Stack) -> None:
        assert stack.kube is not None
        version = (await stack.kube.list(EPHEMERAL_RUNNER)).resource_version
        while True:
            async with stack.kube.watch(EPHEMERAL_RUNNER, resource_version=version) as stream:
                async for event in stream:
                    version = event.resource_version or version
                    now = time.time()
                    meta = event.object.get("metadata") or {}
                    job = str((event.object.get("status") or {}).get("jobId") or "")
                    if job:
                        self.job_named.setdefault(job, now)
                    name = str(meta.get("name"))
                    if name in self.runner_seen:
                        continue
                    self.runner_seen[name] = now
                    owners = meta.get("ownerReferences") or [{}]
                    patch = int((meta.get("annotations") or {}).get(ANNOTATION_PATCH_ID) or 0)
                    key = (str(owners[0].get("name")), patch)
                    self.runners_by_patch[key] = self.runners_by_patch.get(key, 0) + 1
                    if key not in self.first_runner and stack.simulator is not None:
                        set_id = self._set_of_ers.get(key[0], 0)
                        assigned = stack.simulator.engine.statistics(set_id).total_assigned_jobs
                        self.first_runner[key] = (time.time(), assigned if set_id else -1)

    def surplus(self, started: float) -> dict[str, Any]:
        """Where runners beyond the jobs were asked for: per ERS and patchID, the replicas
        asked, how stale the statistics were, and how many runners were created for it."""
        rows = []
        for row in sorted(self.decision_rows, key=lambda r: r["t"]):
            ers = next(
                (d[2] for d in self.decisions if d[1] == row["set"] and d[3] == row["patch"]), ""
            )
            first = self.first_runner.get((ers, row["patch"]))
            rows.append(
                {
                    **row,
                    "t": round(row["t"] - started, 3),
                    "created": self.runners_by_patch.get((ers, row["patch"]), 0),
                    "first_runner_after": None if first is None else round(first[0] - row["t"], 3),
                    "assigned_at_first_runner": None if first is None else first[1],
                }
            )
        overstated = [r for r in rows if r["assigned_in_decision"] > r["assigned_now"]]
        return {
            "decisions": len(rows),
            "runners_created": sum(self.runners_by_patch.values()),
            "decisions_with_stale_count": len(overstated),
            "runners_created_for_stale_decisions": sum(r["created"] for r in overstated),
            "rows": rows,
        }

    async def _watch(self, stack: Stack) -> None:
        assert stack.kube is not None
        version = (await stack.kube.list(EPHEMERAL_RUNNER_SET)).resource_version
        while True:
            async with stack.kube.watch(EPHEMERAL_RUNNER_SET, resource_version=version) as stream:
                async for event in stream:
                    version = event.resource_version or version
                    meta = event.object.get("metadata") or {}
                    patch = int((event.object.get("spec") or {}).get("patchID") or 0)
                    self.patches.setdefault((str(meta.get("name")), patch), time.time())

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.nc.close()

    def per_job(self) -> list[dict[str, float]]:
        out = []
        decisions = sorted(self.decisions)
        for t1, t2, set_id in self.available.values():
            decision = next((d for d in decisions if d[1] == set_id and d[0] >= t2), None)
            if decision is None:
                continue
            t3, _, ers, patch = decision
            t4 = self.patches.get((ers, patch))
            if t4 is None:
                continue
            out.append(
                {"publish": t2 - t1, "worker": t3 - t2, "patch_visible": t4 - t3, "total": t4 - t1}
            )
        return out

    def summary(self) -> dict[str, Any]:
        rows = self.per_job()
        result: dict[str, Any] = {
            "messages": len(rows),
            "batches": self.batches,
            "available": len(self.available),
            "decisions": len(self.decisions),
            "patches": len(self.patches),
        }
        for hop in ("publish", "worker", "patch_visible", "total"):
            values = [r[hop] for r in rows]
            result[hop] = {
                "p50": percentile(values, 0.5),
                "p95": percentile(values, 0.95),
                "p99": percentile(values, 0.99),
            }
        return result


def varz(stack: Stack) -> dict[str, Any]:
    assert stack.nats is not None
    return nats_counters(stack.nats.monitor_url)


#: What the deletion of an ARS must remove (in its namespace and the controller's): the kinds the
#: dev stack counts as the demo's objects.
DELETED_KINDS = COUNTED_KINDS


async def _objects(stack: Stack, keep: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    assert stack.kube is not None
    namespaces = {stack.ars["metadata"]["namespace"], CONTROLLER_NAMESPACE}
    found = set()
    for resource in DELETED_KINDS:
        for obj in (await stack.kube.list(resource)).items:
            meta = obj["metadata"]
            key = (resource.kind, str(meta.get("namespace", "")), str(meta["name"]))
            if key[1] in namespaces and key not in keep:
                found.add(key)
    return found


async def delete_set(stack: Stack, within: float = 120.0) -> dict[str, Any]:
    """Delete the ARS; seconds until every object it had made is gone (as the admin's lists
    see it, every 0.1 s), and the requests per arcflow identity meanwhile."""
    assert stack.kube is not None
    namespace = stack.ars["metadata"]["namespace"]
    keep = stack.identity_objects() | {
        ("Secret", namespace, stack.ars["spec"]["githubConfigSecret"]),
        ("ServiceAccount", namespace, "default"),
        ("ServiceAccount", CONTROLLER_NAMESPACE, "default"),
    }
    before = await _objects(stack, keep)
    since = time.time()
    await stack.kube.delete(
        AUTOSCALING_RUNNER_SET, stack.ars["metadata"]["name"], namespace=namespace
    )
    left = before
    gone_at: float | None = None
    while time.time() - since < within:
        left = await _objects(stack, keep)
        if not left & before:
            gone_at = time.time() - since
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # the last requests of the clean-up reach the audit log
    audit = stack.audit_counts_since(since)
    kinds: dict[str, int] = {}
    for kind, _, _ in before:
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "objects": len(before),
        "objects_by_kind": kinds,
        "all_gone_seconds": None if gone_at is None else round(gone_at, 2),
        "left": sorted("/".join(k) for k in left & before)[:20],
        "api_calls_audit_by_arcflow_user": stack.arcflow_users(audit),
        "api_calls_audit_detail": audit["by_user_verb_resource"] if audit else None,
    }


def _audit_arcflow(stack: Stack, audit: dict[str, Any] | None, runners: int) -> dict[str, Any]:
    """The audit log's requests of arcflow's identities per runner lifecycle."""
    users = stack.arcflow_users(audit)
    if not users:
        return {}
    services = (
        {i.username: name for name, i in stack.parts.identities.items()} if stack.parts else {}
    )
    by_identity: dict[str, int] = {}
    for user, n in users.items():
        name = services.get(user, "listener")
        by_identity[name] = by_identity.get(name, 0) + n
    return {
        "total": sum(users.values()),
        "per_runner": round(sum(users.values()) / max(1, runners), 2),
        "per_runner_by_identity": {
            k: round(v / max(1, runners), 2) for k, v in by_identity.items()
        },
        "by_identity": by_identity,
    }


async def one_run(
    mode: str,
    jobs: int,
    interval: float,
    env: dict[str, str],
    kube: str = "emulator",
    *,
    identities: bool = True,
    direct: bool = False,
    max_runners: int = 1000,
) -> dict[str, Any]:
    load_at_start = loadavg()
    stack_of = Stack(
        env=env,
        kube_backend=kube,
        identities=identities,
        count_requests=not direct,
        max_runners=max_runners,
    )
    async with stack_of as stack:
        await stack.wait_ready()
        await asyncio.sleep(2.0)  # let the start-up reconciles settle before counting
        stack.reset_counts()
        before = varz(stack)
        usage_before = stack.usage()
        assert stack.simulator is not None
        assert stack.pod_runner is not None
        stages_before = scrape_stages(stack.parts)
        passes_before = scrape_passes(stack.parts)
        rpc_before = scrape_rpc(stack.parts)
        gone_before = stage_buckets(stack.parts, "runner_gone")
        bench_cpu_before, plane_before = time.process_time(), control_plane_cpu()
        hops = Hops()
        await hops.start(stack)
        server_profile = ServerProfile(stack.control_plane, f"arcflow-{mode}-{jobs}")
        server_profile.start()
        timeline = CpuTimeline()
        timeline.start()
        queued: dict[str, float] = {}
        started = time.time()
        for index in range(jobs):
            target = stack.targets[index % len(stack.targets)]
            job_id = stack.simulator.enqueue_job(target.job_labels, duration=1.0)
            queued[job_id] = time.time()
            if mode == "trickle":
                await asyncio.sleep(interval)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            states = [stack.simulator.engine.job(j).state.value for j in queued]
            if all(s == "completed" for s in states):
                completed_after = time.time() - started
                break
            await asyncio.sleep(0.25)
        else:
            raise TimeoutError("jobs did not complete")
        await stack.wait_drained()
        drained_after = time.time() - started
        await asyncio.sleep(1.0)
        await hops.stop()
        after = varz(stack)
        usage_after = stack.usage()
        bench_cpu = time.process_time() - bench_cpu_before
        plane_cpu = control_plane_cpu_since(plane_before)
        runner_pods = [r for r in stack.pod_runner.records.values() if r.kind == "runner"]
        await timeline.stop()
        # Who used the cores until every runner pod existed, and over the whole run.
        all_pods_at = max((r.seen_at for r in runner_pods), default=started)
        cpu_to_all_pods = timeline.between(started, all_pods_at)
        cpu_whole_run = timeline.between(started, time.time())
        pod_of_job = {r.job_id: r.seen_at for r in runner_pods if r.job_id}
        to_pod = [pod_of_job[j] - t for j, t in queued.items() if j in pod_of_job]
        to_start = []
        to_named = []  # GitHub's queue time -> this watch saw a runner status name the job
        for job_id, t in queued.items():
            job = stack.simulator.engine.job(job_id)
            if job.runner_assign_time is not None:
                to_start.append(job.runner_assign_time.timestamp() - t)
            if job_id in hops.job_named:
                to_named.append(hops.job_named[job_id] - job.queue_time.timestamp())
        # Where the time to a runner pod goes: enqueue -> EphemeralRunner on a watch, then
        # EphemeralRunner -> its pod seen by the kubelet stand-in (JIT config, Secret, Pod).
        to_er = [t - started for t in hops.runner_seen.values()]
        er_to_pod = [
            r.seen_at - hops.runner_seen[r.name] for r in runner_pods if r.name in hops.runner_seen
        ]
        gone_after = stage_buckets(stack.parts, "runner_gone")
        stage_breakdown = breakdown(stages_before, scrape_stages(stack.parts), to_named, to_start)
        counts = stack.counts()
        audit = stack.audit_counts()
        totals = {client: sum(v.values()) for client, v in counts.items()}
        arcflow_calls = sum(n for c, n in totals.items() if c != "kubelet")
        if direct and audit:  # no proxy: the server's audit log is the only count
            arcflow_calls = sum(stack.arcflow_users(audit).values())
        apiserver_profile = await server_profile.wait()
        deletion = await delete_set(stack)
        streams = {
            name: seq - before["streams"].get(name, 0) for name, seq in after["streams"].items()
        }
        return {
            "kube": kube,
            "identities": identities and kube == "apiserver",
            "loadavg_at_start": load_at_start,
            "deletion": deletion,
            "api_calls_audit_arcflow": _audit_arcflow(stack, audit, len(runner_pods)),
            "surplus": hops.surplus(started),
            "p1_message_to_ers_patch": hops.summary(),
            "jobs": jobs,
            "max_runners": max_runners,
            # Every job completed (seen within 0.25 s): what a capped burst is bound by.
            "all_jobs_completed_after_first_enqueue": round(completed_after, 2),
            "runner_pods": len(runner_pods),
            "queued_to_pod": {
                "p50": percentile(to_pod, 0.5),
                "p95": percentile(to_pod, 0.95),
                "p99": percentile(to_pod, 0.99),
                "max": max(to_pod) if to_pod else None,
            },
            "stages": {
                "enqueue_to_runner": {
                    "p50": percentile(to_er, 0.5),
                    "max": max(to_er) if to_er else None,
                },
                "runner_to_pod": {
                    "p50": percentile(er_to_pod, 0.5),
                    "p95": percentile(er_to_pod, 0.95),
                    "max": max(er_to_pod) if er_to_pod else None,
                },
            },
            "stage_breakdown": stage_breakdown,
            # runner_gone's median and 95th percentile, from its histogram's buckets.
            "runner_gone_p50": _rounded(bucket_quantile(gone_before, gone_after, 0.5)),
            "runner_gone_p95": _rounded(bucket_quantile(gone_before, gone_after, 0.95)),
            # The reconciler's passes per kind during the run (where its workers' time went).
            "reconcile_passes": passes_between(passes_before, scrape_passes(stack.parts)),
            # The registrar's RPC requests per operation (the JIT config's share of a pass).
            "registrar_rpc": passes_between(rpc_before, scrape_rpc(stack.parts)),
            "queued_to_started": {
                "p50": percentile(to_start, 0.5),
                "p95": percentile(to_start, 0.95),
                "p99": percentile(to_start, 0.99),
            },
            "all_pods_created_after_first_enqueue": max(r.seen_at for r in runner_pods) - started
            if runner_pods
            else None,
            "api_calls": counts,
            # The real server's own count per user (``--kube apiserver``; None on the emulator).
            "api_calls_audit": audit,
            "api_calls_by_client": totals,
            "api_calls_per_runner_arcflow": arcflow_calls / max(1, len(runner_pods)),
            "api_calls_per_runner_by_client": {
                c: round(n / max(1, len(runner_pods)), 2) for c, n in totals.items()
            },
            "jetstream_messages_per_job": {
                name: round(n / jobs, 2) for name, n in sorted(streams.items()) if n
            },
            "nats_in_msgs_per_job": round((after["in_msgs"] - before["in_msgs"]) / jobs, 1),
            "cpu_seconds_during_run": {
                name: round(usage_after[name]["cpu_seconds"] - usage_before[name]["cpu_seconds"], 2)
                for name in usage_after
            },
            # The rest of the two cores: this process (the simulator, the pod runner, the
            # watches) and the control plane.
            "cpu_seconds_benchmark_process": round(bench_cpu, 2),
            "cpu_seconds_control_plane": plane_cpu,
            "apiserver_profile": apiserver_profile,
            "cpu_to_all_pods": cpu_to_all_pods,
            "cpu_whole_run": cpu_whole_run,
            # Every EphemeralRunner and runner pod gone (the harness's LIST, every 0.25 s).
            "all_drained_after_first_enqueue": round(drained_after, 2),
            "rss_mib_after": {name: usage_after[name]["rss_mib"] for name in usage_after},
            # Each service started and settled, before the first job: what it costs idle (its
            # imports and connections), the floor under ``rss_mib_after``.
            "rss_mib_before": {name: usage_before[name]["rss_mib"] for name in usage_before},
        }


def with_floor(result: dict[str, Any], floor: dict[str, Any]) -> None:
    """The floor run beside an arcflow run: ``floor_seconds`` next to
    ``all_pods_created_after_first_enqueue``, and each latency over it."""
    base = floor.get("floor_seconds")
    result["floor"] = floor
    result["floor_seconds"] = base
    result["all_pods_over_floor"] = ratio(result["all_pods_created_after_first_enqueue"], base)
    result["over_floor"] = {
        "all_pods_created_after_first_enqueue": result["all_pods_over_floor"],
        **{f"queued_to_pod_{k}": ratio(v, base) for k, v in result["queued_to_pod"].items()},
        **{
            f"queued_to_started_{k}": ratio(v, base) for k, v in result["queued_to_started"].items()
        },
        # The floor's own deletes (the ERs', pods' and Secrets') against the deletion of the
        # whole set: not the same work, shown for scale only.
        "floor_all_deleted_seconds": floor.get("all_deleted_seconds"),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def pick(path: tuple[str, ...]) -> list[float]:
        values = []
        for run in runs:
            value: Any = run
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            if value is not None:
                values.append(float(value))
        if not values:
            return [float("nan")]
        return values

    return {
        "queued_to_pod_p50": spread(pick(("queued_to_pod", "p50"))),
        "queued_to_pod_p95": spread(pick(("queued_to_pod", "p95"))),
        "queued_to_pod_p99": spread(pick(("queued_to_pod", "p99"))),
        "queued_to_started_p95": spread(pick(("queued_to_started", "p95"))),
        "queued_to_started_p50": spread(pick(("queued_to_started", "p50"))),
        "all_jobs_completed_after_first_enqueue": spread(
            pick(("all_jobs_completed_after_first_enqueue",))
        ),
        "api_calls_per_runner_arcflow": spread(pick(("api_calls_per_runner_arcflow",))),
        "all_pods_created_after_first_enqueue": spread(
            pick(("all_pods_created_after_first_enqueue",))
        ),
        "floor_seconds": spread(pick(("floor_seconds",))),
        "all_pods_over_floor": spread(pick(("all_pods_over_floor",))),
        "floor_pods_running_seconds": spread(pick(("floor", "pods_running_seconds"))),
        "floor_loadavg_at_start": [
            r["floor"]["loadavg_at_start"][0] for r in runs if r.get("floor") is not None
        ],
        "p1_total_p99": spread(pick(("p1_message_to_ers_patch", "total", "p99"))),
        "p1_total_p50": spread(pick(("p1_message_to_ers_patch", "total", "p50"))),
        "api_calls_per_runner_arcflow_audit": spread(
            pick(("api_calls_audit_arcflow", "per_runner"))
            if all(r["api_calls_audit_arcflow"] for r in runs)
            else [float("nan")]
        ),
        "deletion_all_gone_seconds": spread(pick(("deletion", "all_gone_seconds"))),
        "loadavg_at_start": [r["loadavg_at_start"][0] for r in runs],
        "runner_pods_equal_jobs": all(r["runner_pods"] == r["jobs"] for r in runs),
        "runner_pods": [r["runner_pods"] for r in runs],
        "runner_gone_mean": spread(pick(("stage_breakdown", "stages", "runner_gone", "mean"))),
        "runner_gone_p50": spread(pick(("runner_gone_p50",))),
        "runner_gone_p95": spread(pick(("runner_gone_p95",))),
        "jit_config_mean": spread(pick(("stage_breakdown", "stages", "jit_config", "mean"))),
        # How busy the machine was until every runner pod existed (cores, of os.cpu_count()).
        "cores_busy_to_all_pods": spread(pick(("cpu_to_all_pods", "cores_busy"))),
        "floor_cores_busy_to_all_pods": spread(pick(("floor", "cpu_to_all_pods", "cores_busy"))),
        "stage_sum_to_end_to_end_ratio": spread(pick(("stage_breakdown", "ratio"))),
        "stage_sum_less_start_reported_to_github_ratio": spread(
            pick(("stage_breakdown", "ratio_by_github"))
        ),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("trickle", "burst"), default="trickle")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--kube",
        choices=("emulator", "apiserver", "alternate"),
        default="emulator",
        help="the API emulator (the results' baseline), a real control plane with audit log, "
        "or both in turn (emulator first; --runs of each)",
    )
    parser.add_argument(
        "--identities",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on the real server, each service as its chart's ServiceAccount (default)",
    )
    parser.add_argument(
        "--direct",
        action="store_true",
        help="on the real server, no counting proxy: every client talks to the server itself "
        "(the proxies' HTTP work shares this process with the pod runner and the simulator); "
        "the audit log still counts each identity's requests",
    )
    parser.add_argument("--label", default="", help="suffix of the result file (e.g. before)")
    parser.add_argument(
        "--max-runners",
        type=int,
        default=1000,
        help="maxRunners of the set and of each variant (a capped burst: jobs beyond it wait "
        "for finished runners' slots)",
    )
    parser.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a floor run (_floor.py, a fresh control plane, no arcflow service) before each "
        "run; default: on for a burst on the real server (apiserver, alternate)",
    )
    parser.add_argument(
        "--floor-concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="requests in flight of the floor's client at most",
    )
    parser.add_argument(
        "--before-rev",
        default="",
        help="alternate runs of this revision's services (before) with this checkout's (after)",
    )
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for every service (repeatable)"
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=2.5,
        help="wait (up to 10 min) before each run until the 1-minute load is under this; 0: no",
    )
    args = parser.parse_args()
    jobs = args.jobs or (40 if args.mode == "trickle" else 200)
    env = dict(item.split("=", 1) for item in args.env)
    floor = (
        args.floor if args.floor is not None else (args.mode == "burst" and args.kube != "emulator")
    )
    info = machine() | commit()
    runs = []
    kubes = ("emulator", "apiserver") if args.kube == "alternate" else (args.kube,)
    sides = {"": env}
    if args.before_rev:
        from one_trigger import export_tree, pythonpath

        before = {"PYTHONPATH": pythonpath(export_tree(args.before_rev))}
        sides = {"before": env | before, "after": env}
    floor_result: dict[str, Any] | None = None
    for index in range(args.runs * len(kubes) * len(sides)):
        kube = kubes[index // len(sides) % len(kubes)]
        side = list(sides)[index % len(sides)]
        if index % len(sides) == 0:
            floor_result = None  # one floor per round: before the first side, shared by all
        if floor and floor_result is None:
            if args.max_load:
                wait_quiet(args.max_load)
            floor_result = await measure_floor(
                jobs, kube_backend=kube, concurrency=args.floor_concurrency
            )
            print(
                f"floor before run {index + 1} ({kube}, load "
                f"{floor_result['loadavg_at_start'][0]}): every pod seen after "
                f"{floor_result['floor_seconds']}s, Running after "
                f"{floor_result['pods_running_seconds']}s, all deleted after "
                f"{floor_result['all_deleted_seconds']}s, errors {floor_result['errors']}",
                flush=True,
            )
        if args.max_load:
            wait_quiet(args.max_load)
        result = await one_run(
            args.mode,
            jobs,
            args.interval,
            sides[side],
            kube,
            identities=args.identities,
            direct=args.direct and kube == "apiserver",
            max_runners=args.max_runners,
        )
        result["side"] = side
        if floor_result is not None:
            with_floor(result, floor_result)
        runs.append(result)
        audit = result["api_calls_audit_arcflow"]
        gone = (result["stage_breakdown"]["stages"].get("runner_gone") or {}).get("mean")
        print(
            f"run {index + 1} ({kube}{' ' + side if side else ''}, "
            f"load {result['loadavg_at_start'][0]}): runner_gone mean {gone}s, "
            f"deletion {result['deletion']['all_gone_seconds']}s "
            f"of {result['deletion']['objects']} objects, "
            f"audit/runner {audit.get('per_runner')} {audit.get('per_runner_by_identity')}",
            flush=True,
        )
        stages = result["stage_breakdown"]
        print(
            f"  stages: sum of means {stages['sum_of_means_to_job_started']}s, queued -> "
            f"runner status names the job {stages['end_to_end_mean']}s, ratio {stages['ratio']}; "
            f"less start_reported {stages['sum_to_job_started_by_github']}s, queued -> started "
            f"(GitHub) {stages['end_to_end_github_mean']}s, ratio {stages['ratio_by_github']}",
            flush=True,
        )
        print(
            f"  pods {result['runner_pods']}/{jobs} "
            f"queued->pod p50 {result['queued_to_pod']['p50']:.2f}s "
            f"p95 {result['queued_to_pod']['p95']:.2f}s "
            f"all pods {result['all_pods_created_after_first_enqueue']:.1f}s "
            f"(floor {result.get('floor_seconds')}s, x{result.get('all_pods_over_floor')}) "
            f"api/runner {result['api_calls_per_runner_arcflow']:.1f} "
            f"P1 p99 {result['p1_message_to_ers_patch']['total']['p99']} "
            f"{result['api_calls_per_runner_by_client']}",
            flush=True,
        )
        print(
            "  reconcile passes: "
            + ", ".join(
                f"{kind} {p['passes']} x {p['mean']}s = {p['seconds']}s"
                for kind, p in result["reconcile_passes"].items()
            ),
            flush=True,
        )
    with open("/proc/loadavg") as handle:  # noqa: ASYNC230
        info["loadavg_at_end"] = [float(x) for x in handle.read().split()[:3]]
    payload = {
        "mode": args.mode,
        "kube": args.kube,
        "jobs": jobs,
        "interval": args.interval,
        "env": env,
        "machine": info,
        "commit": info["commit"],
        "floor": floor,
        "identities": args.identities,
        "direct": args.direct,
        "before_rev": args.before_rev,
        "summary": summarize(runs)
        if len(kubes) == 1 and len(sides) == 1
        else {
            f"{k}{'-' + side if side else ''}": summarize(
                [r for r in runs if r["kube"] == k and r["side"] == side]
            )
            for k in kubes
            for side in sides
        },
        "runs": runs,
    }
    kube = "" if args.kube == "emulator" else f"-{args.kube}"  # emulator names unchanged
    name = f"pipeline-{args.mode}{kube}" + (f"-{args.label}" if args.label else "")
    print(json.dumps(payload["summary"], indent=2))
    print(f"written to {write_result(name, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
