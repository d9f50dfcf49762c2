"""P5: many AutoscalingRunnerSets at once: time to every object, RSS/CPU, idle API calls.

Not a test. One stack per run (``_stack.Stack(example=False)``: the services as processes, a
counting proxy per Kubernetes client, a kubelet stand-in that marks pods Running without
starting listener processes). Applies ``--ars`` ARSs with ``--variants`` variants each at
once, then records when every runner scale set (simulator), EphemeralRunnerSet,
AutoscalingListener and running listener pod exists, the services' RSS and CPU seconds, and,
after ``--idle`` seconds of quiet, the controller's own API calls per second (watcher,
registrar, reconciler). Three runs by default; results in ``benchmarks/results/scale.json``.
With ``--real-listeners --settle-polls`` the idle window starts once every scale set's first
message poll was answered (a settled fleet), and it also counts the Kubernetes writes per
minute per client and the NATS messages per scale set per minute.

    .venv/bin/python benchmarks/scale.py --ars 100 --variants 10
    .venv/bin/python benchmarks/scale.py --ars 20 --variants 10 --real-listeners --kube alternate
    .venv/bin/python benchmarks/scale.py --fleet 88 --kube alternate   # the 88-shape fleet

``--kube apiserver`` runs on a real control plane with an audit log, each service as its
chart's ServiceAccount (``--no-identities``: as the admin), and counts the requests per arcflow
identity there too; ``--kube alternate`` runs the emulator and the real server in turn.
``--variants 0``: single-shape ARSs (no ``runnerVariants``, upstream's shape). ``--fleet N``:
N single-shape ARSs against one ARS with N variants, both with real listener processes, in
turn: listener pods, objects, the listeners' memory, API calls, time to every session open.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cpu_timeline import CpuTimeline, sample, used_since
from _floor import commit
from _report import wait_quiet
from _stack import Stack, loadavg, machine, nats_in_msgs, proc_usage, spread, write_result
from _timeline import (
    RecordingRequests,
    Timeline,
    per_listener_lags,
    process_started,
    watch_stages,
)

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    ConflictError,
    KubeClient,
)

NAMESPACE = "scale"
CONTROLLER_NAMESPACE = "arc-systems"


def ars_manifest(index: int, variants: int, config_url: str) -> dict[str, Any]:
    template = {
        "spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/actions-runner"}]}
    }
    spec: dict[str, Any] = {
        "githubConfigUrl": config_url,
        "githubConfigSecret": "github",
        "template": template,
    }
    if variants:  # 0: a single-shape ARS, as upstream has it
        spec["runnerVariants"] = [
            {"name": f"v{j}", "runnerScaleSetLabels": [f"set{index}-v{j}"]} for j in range(variants)
        ]
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": f"set{index}", "namespace": NAMESPACE},
        "spec": spec,
    }


#: The kinds counted as the objects a fleet needs (in its namespace and the controller's).
FLEET_KINDS = (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    AUTOSCALING_LISTENER,
    POD,
    SECRET,
    SERVICE_ACCOUNT,
    ROLE,
    ROLE_BINDING,
)


async def count_objects(kube: KubeClient, skip: set[tuple[str, str, str]]) -> dict[str, int]:
    """Objects per kind in the ARS and controller namespaces, less ``skip`` (the identities',
    the credentials Secret, the ``default`` ServiceAccounts)."""
    counts: dict[str, int] = {}
    for resource in FLEET_KINDS:
        for obj in (await kube.list(resource)).items:
            meta = obj["metadata"]
            key = (resource.kind, str(meta.get("namespace", "")), str(meta["name"]))
            if key[1] in (NAMESPACE, CONTROLLER_NAMESPACE) and key not in skip:
                counts[resource.kind] = counts.get(resource.kind, 0) + 1
    return counts


def audit_by_identity(stack: Stack, audit: dict[str, Any] | None) -> dict[str, int]:
    """The audit log's requests per arcflow identity (services by name, listeners summed)."""
    services = (
        {i.username: name for name, i in stack.parts.identities.items()} if stack.parts else {}
    )
    out: dict[str, int] = {}
    for user, n in stack.arcflow_users(audit).items():
        name = services.get(user, "listener")
        out[name] = out.get(name, 0) + n
    return out


def live_sessions(snapshot: dict[str, Any]) -> int:
    """Scale sets whose listener holds a live message session (simulator's view)."""
    return sum(1 for scale_set in snapshot["scaleSets"] if scale_set.get("session"))


@contextlib.asynccontextmanager
async def count_subjects(
    stack: Stack, *, enabled: bool, tokens: int = 3
) -> AsyncIterator[Counter[str]]:
    """Every message on the (authorization-free) benchmark server while inside, counted by
    its subject's first ``tokens`` tokens (each client's inboxes as one): where a settled
    fleet's traffic goes."""
    counts: Counter[str] = Counter()
    if not enabled:
        yield counts
        return
    assert stack.nats is not None
    client = await nats.connect(stack.nats.url)

    async def count(msg: Msg) -> None:
        parts = msg.subject.split(".")
        inbox = parts[0].startswith("_INBOX")  # _INBOX, or a service's _INBOX_<name>
        counts[parts[0] if inbox else ".".join(parts[:tokens])] += 1

    try:
        await client.subscribe(">", cb=count)
        yield counts
    finally:
        await client.close()


def idle_writes_per_minute(calls: dict[str, dict[str, int]], seconds: float) -> dict[str, float]:
    """Per arcflow client, its requests that change something (not get, list or watch), per
    minute of the idle window."""
    reads = ("get ", "list ", "watch ")
    return {
        client: round(
            sum(n for verb, n in by_verb.items() if not verb.startswith(reads)) / (seconds / 60), 2
        )
        for client, by_verb in calls.items()
        if client != "kubelet"
    }


async def one_run(
    ars: int,
    variants: int,
    idle: float,
    *,
    real_listeners: bool = False,
    poll_timeout: float = 5.0,
    bytecode_cache: str | None = None,
    count_requests: bool = True,
    kube_backend: str = "emulator",
    identities: bool = True,
    settle_polls: bool = False,
    subject_tokens: int = 3,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    load_at_start = loadavg()
    async with Stack(
        env=env or {},
        count_requests=count_requests,
        kube_backend=kube_backend,
        identities=identities,
        example=False,
        real_listeners=real_listeners,
        poll_timeout=poll_timeout,
        listener_bytecode_cache=bytecode_cache,
    ) as stack:
        assert stack.kube is not None
        assert stack.simulator is not None
        kube = stack.kube
        for namespace in (NAMESPACE, CONTROLLER_NAMESPACE):
            with contextlib.suppress(ConflictError):  # the stack made the controller's
                await kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
        token = stack.simulator.add_pat()
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "github", "namespace": NAMESPACE},
                "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
            }
        )
        await asyncio.sleep(3.0)  # the services' first lists and watches
        stack.reset_counts()
        timeline = Timeline()
        stack.simulator.requests = RecordingRequests(timeline)
        watching = asyncio.create_task(
            watch_stages(kube, timeline, {"runners": NAMESPACE, "controller": CONTROLLER_NAMESPACE})
        )
        await asyncio.sleep(0.5)  # the watches are open before the apply
        timeline.started = time.time()
        harness_cpu = time.process_time()
        cpu = CpuTimeline()  # who used the cores until each stage was done
        cpu.start()
        started_wall, started = time.time(), time.monotonic()
        config_url = stack.simulator.config_url("example-org")
        await asyncio.gather(
            *(kube.create(ars_manifest(i, variants, config_url)) for i in range(ars))
        )
        applied = time.monotonic() - started
        done: dict[str, float] = {}
        sets = ars * max(1, variants)
        want = {"scale_sets": sets, "ers": sets, "al": ars, "pods": ars}
        if real_listeners:
            want["sessions"] = sets
        deadline = time.monotonic() + 600
        while len(done) < len(want) and time.monotonic() < deadline:
            # Watch-fed counts (see _timeline): no LIST of 1,000 objects twice a second from
            # the harness, which shares its process with the emulator and the simulator.
            snapshot = stack.simulator.snapshot()
            stages = timeline.stages
            counts = {
                "sessions": live_sessions(snapshot),
                "scale_sets": len(snapshot["scaleSets"]),
                "ers": len(stages.get("ers_created", {})),
                "al": len(stages.get("al_created", {})),
                "pods": len(stages.get("listener_pod_running", {})),
            }
            for name, n in counts.items():
                if name in want and name not in done and n >= want[name]:
                    done[name] = time.monotonic() - started
            await asyncio.sleep(0.5)
        await cpu.stop()
        busy = stack.counts()
        audit_busy = stack.audit_counts()
        usage = stack.usage()
        listener_pids = stack.pod_runner.running_processes if stack.pod_runner else []
        listener_cpu = sum(proc_usage(pid)[1] for pid in listener_pids)
        listener_rss = sum(proc_usage(pid)[0] for pid in listener_pids)
        skip = stack.identity_objects() | {
            ("Secret", NAMESPACE, "github"),
            ("ServiceAccount", NAMESPACE, "default"),
            ("ServiceAccount", CONTROLLER_NAMESPACE, "default"),
        }
        objects = await count_objects(kube, skip)
        if stack.pod_runner is not None:
            process_started(timeline, stack.pod_runner.records)
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        with open("/proc/loadavg") as handle:  # noqa: ASYNC230
            load_when_done = [float(x) for x in handle.read().split()[:3]]
        settled_after = None
        if settle_polls and real_listeners:
            # A settled fleet (issue 31, goal 6): every scale set's first message poll has
            # been answered (the simulator holds an empty one for ``poll_timeout``), and the
            # listener's patch after it has had time to be reconciled.
            deadline = time.monotonic() + poll_timeout + 300
            while time.monotonic() < deadline:
                if len(timeline.stages.get("first_poll_answered", {})) >= sets:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(10.0)
            settled_after = round(time.monotonic() - started, 1)
        stack.reset_counts()
        nats_before = nats_in_msgs(stack)
        idle_cpu_before = sample(os.getpid())
        async with count_subjects(stack, enabled=settle_polls, tokens=subject_tokens) as subjects:
            await asyncio.sleep(idle)
        idle_cpu = used_since(idle_cpu_before, os.getpid())
        nats_after = nats_in_msgs(stack)
        quiet = stack.counts()
        audit_quiet = stack.audit_counts()
        controller_calls = sum(
            n
            for client in ("watcher", "registrar", "reconciler")
            for n in quiet.get(client, {}).values()
        )
        return {
            "kube": kube_backend,
            "identities": identities and kube_backend == "apiserver",
            "loadavg_at_start": load_at_start,
            "objects": objects,
            "objects_total": sum(objects.values()),
            "listener_rss_mib_total": round(listener_rss, 1),
            "api_calls_until_done_audit_by_identity": audit_by_identity(stack, audit_busy),
            "idle_calls_audit_by_identity": audit_by_identity(stack, audit_quiet),
            "api_calls_until_done_audit_detail": (
                audit_busy["by_user_verb_resource"] if audit_busy else None
            ),
            "ars": ars,
            "variants": variants,
            "real_listeners": real_listeners,
            "poll_timeout": poll_timeout,
            "listener_bytecode_cache": bool(bytecode_cache),
            "counting_proxies": count_requests,
            "apply_seconds": round(applied, 2),
            "seconds_until": {k: round(v, 1) for k, v in done.items()},
            "cpu_until": {k: cpu.between(started_wall, started_wall + v) for k, v in done.items()},
            "all_objects_seconds": max(
                done.get(k, float("nan")) for k in ("scale_sets", "ers", "al")
            ),
            "complete": len(done) == len(want),
            "api_calls_until_done": {c: sum(v.values()) for c, v in busy.items()},
            "api_calls_until_done_detail": busy,
            "idle_window_seconds": idle,
            # Who uses the cores while the fleet is idle (the benchmark process: the
            # simulator holding polls, the pod runner), CPU seconds per minute.
            "idle_cpu_seconds_per_minute": {
                k: round(v / (idle / 60), 2) for k, v in idle_cpu.items()
            },
            "idle_controller_calls_per_second": (
                round(controller_calls / idle, 3) if count_requests else None
            ),
            "idle_controller_calls_per_second_per_100_scale_sets": (
                round(controller_calls / idle / (sets / 100), 3) if count_requests else None
            ),
            "idle_calls": quiet,
            "idle_after_seconds": settled_after,
            "idle_kube_writes_per_minute": idle_writes_per_minute(quiet, idle),
            "idle_nats_subjects_per_minute": {
                k: round(n / (idle / 60), 1) for k, n in subjects.most_common(20)
            },
            "idle_nats_msgs_per_scale_set_per_minute": round(
                (nats_after - nats_before) / sets / (idle / 60), 3
            ),
            "services": usage,
            "timeline": timeline.summary(),
            "per_listener_seconds": per_listener_lags(timeline),
            "listener_processes": len(listener_pids),
            "listener_cpu_seconds_total": round(listener_cpu, 1),
            # This process: the emulator, the proxies, the simulator and the pod runner.
            "harness_cpu_seconds": round(time.process_time() - harness_cpu, 1),
            "loadavg_when_done": load_when_done,
        }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ars", type=int, default=100)
    parser.add_argument("--variants", type=int, default=10)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--real-listeners",
        action="store_true",
        help="run real listener processes (the dev stack's pod runner) and time every session",
    )
    parser.add_argument(
        "--poll-timeout",
        type=float,
        default=50.0,
        help="seconds the simulator holds an empty message poll (GitHub: about 50)",
    )
    parser.add_argument(
        "--compile-at-start",
        action="store_true",
        help="no bytecode cache for listener processes (each compiles its modules at start)",
    )
    parser.add_argument(
        "--direct",
        action="store_true",
        help="no counting proxies: clients talk to the emulator directly (no request counts)",
    )
    parser.add_argument(
        "--kube",
        choices=("emulator", "apiserver", "alternate"),
        default="emulator",
        help="the API emulator, a real control plane with audit log, or both in turn",
    )
    parser.add_argument(
        "--identities",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on the real server, each service as its chart's ServiceAccount (default)",
    )
    parser.add_argument(
        "--settle-polls",
        action="store_true",
        help="with real listeners: start the idle window once every scale set's first poll "
        "was answered (a settled fleet), and count NATS messages and Kubernetes writes in it",
    )
    parser.add_argument(
        "--subject-tokens",
        type=int,
        default=3,
        help="with --settle-polls: count subjects by this many leading tokens "
        "(5 names each KV bucket and stream)",
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=2.5,
        help="wait (up to 10 min) before each run until the 1-minute load is under this; 0: no",
    )
    parser.add_argument(
        "--before-rev",
        default="",
        help="alternate each run between the services of this revision (its libs and "
        "services, exported read-only) and this tree's",
    )
    parser.add_argument(
        "--fleet",
        type=int,
        default=0,
        help="N: N single-shape ARSs vs one ARS with N variants, real listeners, in turn",
    )
    args = parser.parse_args()
    cache = None if args.compile_at_start else str(Path(tempfile.gettempdir()) / "arcflow-p5-pyc")
    info = machine()
    runs = []
    kubes = ("emulator", "apiserver") if args.kube == "alternate" else (args.kube,)
    shapes = [(args.ars, args.variants)]
    if args.fleet:
        shapes = [(args.fleet, 0), (1, args.fleet)]
    sides: dict[str, dict[str, str]] = {"": {}}
    if args.before_rev:
        from one_trigger import export_tree, pythonpath

        before = {"PYTHONPATH": pythonpath(export_tree(args.before_rev))}
        sides = {"before": before, "after": {}}
    cases = [
        (k, a, v, side)
        for _ in range(args.runs)
        for k in kubes
        for a, v in shapes
        for side in sides
    ]
    for index, (kube, n_ars, n_variants, side) in enumerate(cases):
        if args.max_load:
            wait_quiet(args.max_load)
        result = await one_run(
            n_ars,
            n_variants,
            args.idle,
            real_listeners=args.real_listeners or bool(args.fleet),
            poll_timeout=args.poll_timeout,
            bytecode_cache=cache,
            count_requests=not args.direct,
            kube_backend=kube,
            identities=args.identities,
            settle_polls=args.settle_polls,
            subject_tokens=args.subject_tokens,
            env=sides[side],
        )
        result["side"] = side
        runs.append(result)
        per_100 = result["idle_controller_calls_per_second_per_100_scale_sets"]
        print(
            f"run {index + 1} {side} ({kube}, {n_ars} ARS x {n_variants} variants, load "
            f"{result['loadavg_at_start'][0]}): objects {result['objects_total']} "
            f"{result['objects']} listener RSS {result['listener_rss_mib_total']} MiB "
            f"audit {result['api_calls_until_done_audit_by_identity']} "
            f"proxy {result['api_calls_until_done']}",
            flush=True,
        )
        print(
            f"  {result['seconds_until']} complete={result['complete']} "
            f"idle calls/s per 100 sets {per_100} services {result['services']} "
            f"listener CPU s {result['listener_cpu_seconds_total']} "
            f"idle writes/min {result['idle_kube_writes_per_minute']} NATS msgs per set per "
            f"min {result['idle_nats_msgs_per_scale_set_per_minute']} "
            f"idle CPU s/min {result['idle_cpu_seconds_per_minute']} "
            f"load {result['loadavg_when_done']}",
            flush=True,
        )
        for stage, row in result["timeline"].items():
            print(f"  {stage:24} {row}", flush=True)
        print(f"  per listener {result['per_listener_seconds']}", flush=True)
    with open("/proc/loadavg") as handle:  # noqa: ASYNC230
        info["loadavg_at_end"] = [float(x) for x in handle.read().split()[:3]]
    summary = {
        f"{k} {a}x{v}" + (f" {side}" if side else ""): summarize(
            [r for r in runs if (r["kube"], r["ars"], r["variants"], r["side"]) == (k, a, v, side)]
        )
        for k in kubes
        for a, v in shapes
        for side in sides
    }
    payload = {
        "machine": info | commit(),
        "before_rev": args.before_rev,
        "summary": summary,
        "runs": runs,
    }
    name = "scale" + (f"-{args.label}" if args.label else "")
    print(json.dumps(summary, indent=2))
    print(f"written to {write_result(name, payload)}")
    return 0


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    if not runs:
        return {}
    return {
        "loadavg_at_start": [r["loadavg_at_start"][0] for r in runs],
        "objects_total": [r["objects_total"] for r in runs],
        "listener_pods": [r["listener_processes"] for r in runs],
        "listener_rss_mib_total": spread([r["listener_rss_mib_total"] for r in runs]),
        "api_calls_until_done_proxy_arcflow": [
            sum(n for c, n in r["api_calls_until_done"].items() if c != "kubelet") for r in runs
        ],
        "api_calls_until_done_audit": [
            sum(r["api_calls_until_done_audit_by_identity"].values()) for r in runs
        ],
        "complete": [r["complete"] for r in runs],
        "all_objects_seconds": spread([r["all_objects_seconds"] for r in runs]),
        "listener_pods_running_seconds": spread(
            [r["seconds_until"].get("pods", float("nan")) for r in runs]
        ),
        "every_session_open_seconds": spread(
            [r["seconds_until"].get("sessions", float("nan")) for r in runs]
        ),
        "reconciler_rss_mib": spread([r["services"]["reconciler"]["rss_mib"] for r in runs]),
        "idle_nats_msgs_per_scale_set_per_minute": [
            r.get("idle_nats_msgs_per_scale_set_per_minute") for r in runs
        ],
        "idle_kube_writes_per_minute": [r.get("idle_kube_writes_per_minute") for r in runs],
        "idle_calls_per_second_per_100_scale_sets": spread(
            [r["idle_controller_calls_per_second_per_100_scale_sets"] or float("nan") for r in runs]
        ),
    }


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
