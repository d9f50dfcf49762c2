"""Upstream ARC and arcflow side by side, in one invocation (issue #20, ADR 0060).

Not a test. Three layouts, in turn, each on a fresh real control plane (kube-apiserver, etcd,
kube-controller-manager), the same Actions simulator and the same pod runner:

* ``upstream``: upstream actions-runner-controller v0.27.6 (``scripts/arc.sh``; its controller
  as the chart's ServiceAccount, its CRDs and RBAC from its own chart) with N single-shape
  AutoscalingRunnerSets, each one ``gha-runner-scale-set`` release rendered from upstream's
  chart; the pod runner runs upstream's listener binary for its listener pods;
* ``arcflow-sets``: arcflow (watcher, registrar, reconciler, each as its chart's
  ServiceAccount) with the same N single-shape ARSs;
* ``arcflow-variants``: arcflow with one ARS of N ``runnerVariants``.

For N in ``--sizes`` (default 3 and 88), ``--runs`` times, alternating layouts. Per layout run:

* setup: apply, then wait until every scale set has an open message session; the seconds,
  then the pods and the objects in the two namespaces (the controllers' own install
  identities, the ``default`` ServiceAccounts and the shared credentials Secret left out);
* idle (``--idle`` seconds, none by default): nothing queued; the controller side's and the
  listeners' CPU per minute;
* trickle: ``--trickle`` jobs, one every ``--interval`` s, round-robin over the scale sets;
  then a burst of ``--burst`` jobs at once; each drained (every job completed, no runner left);
* per phase: job queued -> the runner pod that took it (p50/p95/max, the pod runner's clock),
  Kubernetes API requests per runner pod from the API server's own ``apiserver_request_total``
  (every client) and from its audit log (the controller side's and the listeners' identities),
  GitHub (simulator) requests per job, and the RSS and CPU seconds of the controller side
  (upstream: its controller; arcflow: watcher, registrar, reconciler and nats-server) and of
  the listener processes.

``ARCFLOW_BENCH_PROFILE=<service>[,...]`` runs those arcflow services under cProfile, each
profile written into the layout run's folder (printed at the start) as ``<service>.prof``.

Results: ``benchmarks/results/vs-arc[-LABEL].json`` (rewritten after each layout run), the
table in docs/benchmarks/vs-arc.md.

    HELM=/path/to/helm .venv/bin/python benchmarks/vs_arc.py --sizes 3,88 --runs 2

Needs Go 1.26 and the module proxy for the first build, root (upstream's listener gets its
token through a mount namespace: arcflow.devstack.upstream_arc), and the control plane
binaries (docs/control-plane.md).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import ssl
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _audit import audit_counts
from _report import wait_quiet
from _stack import (
    loadavg,
    machine,
    nats_counters,
    proc_usage,
    profiled_services,
    warm_bytecode_cache,
    write_result,
)

from arcflow.common.actions.auth import KEY_TOKEN
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    ConflictError,
    KubeClient,
)
from arcflow.devstack import demo, upstream_arc
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.demo import percentile
from arcflow.devstack.factory import StackFactory, StackParts
from arcflow.devstack.pod_runner import classify_pod

NAMESPACE = "vs-arc"
CONTROLLER_NAMESPACE = "arc-systems"
LAYOUTS = ("upstream", "arcflow-sets", "arcflow-variants")
MAX_RUNNERS = 1000
KINDS = (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER_SET,
    AUTOSCALING_LISTENER,
    EPHEMERAL_RUNNER,
    POD,
    SECRET,
    SERVICE_ACCOUNT,
    ROLE,
    ROLE_BINDING,
)
IDENTITY_PREFIX = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:"


class CountingRequests:
    """Stands in for the simulator's request log: counts every GitHub/Actions request."""

    def __init__(self) -> None:
        self.total = 0
        self.by_route: Counter[str] = Counter()

    def append(self, record: Any) -> None:
        self.total += 1
        self.by_route[f"{record.method} {_route(record.path)}"] += 1

    def __iter__(self) -> Any:
        return iter(())


def _route(path: str) -> str:
    parts = [("{n}" if p.isdigit() else p) for p in path.split("/")]
    return "/".join(parts)[:90]


def apiserver_requests(plane: ControlPlane) -> int:
    """Sum of ``apiserver_request_total`` over every label set: the server's own count."""
    creds = plane.credentials
    context = ssl.create_default_context(cafile=str(creds.ca))
    context.load_cert_chain(str(creds.admin_cert), str(creds.admin_key))
    with urllib.request.urlopen(f"{plane.url}/metrics", timeout=10, context=context) as r:  # noqa: S310
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


@dataclass
class Layout:
    """One layout on one fresh stack."""

    name: str
    size: int
    parts: StackParts
    peer: upstream_arc.ArcPeer | None = None
    targets: list[tuple[str, list[str]]] = field(default_factory=list)  # (set, job labels)

    @property
    def plane(self) -> ControlPlane:
        assert self.parts.control_plane is not None
        return self.parts.control_plane

    def controller_pids(self) -> dict[str, int]:
        if self.peer is not None:
            assert self.peer.controller is not None
            assert self.peer.controller.process is not None
            return {"arc-controller": self.peer.controller.process.pid}
        out = {}
        for name, service in self.parts.services.items():
            if service.process.process is not None:
                out[name] = service.process.process.pid
        nats = self.parts.nats
        process = getattr(nats, "_process", None)
        if process is not None:
            out["nats-server"] = process.pid
        return out

    def nats_counts(self) -> dict[str, Any] | None:
        """:func:`nats_counters` of arcflow's nats-server; ``None`` for upstream (none)."""
        nats = self.parts.nats
        if nats is None or self.peer is not None:
            return None
        return nats_counters(nats.monitor_url)

    def usage(self) -> dict[str, Any]:
        controller = {n: proc_usage(p) for n, p in self.controller_pids().items()}
        assert self.parts.pod_runner is not None
        listeners = [proc_usage(p) for p in self.parts.pod_runner.running_processes]
        return {
            "controller_rss_mib": round(sum(u[0] for u in controller.values()), 1),
            "controller_cpu_s": round(sum(u[1] for u in controller.values()), 2),
            "controller_by_process": {
                n: {"rss_mib": round(u[0], 1), "cpu_s": round(u[1], 2)}
                for n, u in controller.items()
            },
            "listener_processes": len(listeners),
            "listener_rss_mib": round(sum(u[0] for u in listeners), 1),
            "listener_cpu_s": round(sum(u[1] for u in listeners), 2),
        }


async def start_layout(
    name: str,
    size: int,
    work: Path,
    build: upstream_arc.ArcBuild,
    poll_timeout: float,
    env: Mapping[str, str],
) -> tuple[StackFactory, Layout]:
    """``env``: the arcflow services' and listener's environment (``--before-rev``: the
    ``PYTHONPATH`` of the exported tree, with its own bytecode cache)."""
    arcflow = name != "upstream"
    listener_env: dict[str, str] = {}
    if arcflow:  # what the listener image does at build (as scale.py --fleet)
        cache = "pycache-before" if "PYTHONPATH" in env else "pycache"
        listener_env = {
            "PYTHONPYCACHEPREFIX": str(work.parent / cache),
            "PYTHONDONTWRITEBYTECODE": "",
            **({"PYTHONPATH": env["PYTHONPATH"]} if "PYTHONPATH" in env else {}),
        }
        await warm_bytecode_cache(listener_env)
    factory = StackFactory(
        kube="apiserver",
        audit=True,
        identities=arcflow,
        services=("watcher", "registrar", "reconciler") if arcflow else (),
        service_env=dict(env) if arcflow else {},
        poll_timeout=poll_timeout,
        pod_runner=True,
        job_duration=1.0,
        listener_env=listener_env,
        service_python_args=profiled_services(work) if arcflow else {},
        namespaces=[NAMESPACE],
        proxy=False,
        work_dir=work,
    )
    parts = await factory.__aenter__()
    layout = Layout(name, size, parts)
    if not arcflow:
        peer = upstream_arc.ArcPeer(build, layout.plane, work / "arc")
        await asyncio.to_thread(peer.start, parts.pod_runner)
        layout.peer = peer
    return factory, layout


def arcflow_ars(name: str, config_url: str, variants: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "githubConfigUrl": config_url,
        "githubConfigSecret": "github",
        "maxRunners": MAX_RUNNERS,
        "minRunners": 0,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "runner",
                        "image": "ghcr.io/actions/actions-runner:latest",
                        "command": ["/home/runner/run.sh"],
                    }
                ]
            }
        },
    }
    if variants:
        spec["runnerVariants"] = [
            {
                "name": f"v{j}",
                "runnerScaleSetLabels": [f"{name}-v{j}"],
                "maxRunners": MAX_RUNNERS,
                "minRunners": 0,
            }
            for j in range(variants)
        ]
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


async def apply_layout(layout: Layout) -> list[tuple[str, str, str]]:
    """Apply the N scale sets; returns what the user applied (kind, namespace, name)."""
    sim = layout.parts.simulator
    kube = layout.parts.kube
    assert sim is not None
    config_url = sim.config_url("example-org")
    token = sim.add_pat()
    applied: list[tuple[str, str, str]] = []
    if layout.peer is not None:
        peer = layout.peer
        assert peer.chart is not None
        docs: list[dict[str, Any]] = []
        for i in range(layout.size):
            release = f"set{i}"
            docs += upstream_arc.render_scale_set_chart(
                peer.build,
                layout.parts.temp / "releases",
                release=release,
                namespace=NAMESPACE,
                config_url=config_url,
                token=token,
                controller_service_account=peer.chart.service_account,
                max_runners=MAX_RUNNERS,
                min_runners=0,
            )
            layout.targets.append((release, [release]))
        await asyncio.to_thread(peer.apply, docs)
        return [(d["kind"], NAMESPACE, d["metadata"]["name"]) for d in docs]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "github", "namespace": NAMESPACE},
        "data": {KEY_TOKEN: base64.b64encode(token.encode()).decode()},
    }
    with contextlib.suppress(ConflictError):
        await kube.create(secret)
    applied.append(("Secret", NAMESPACE, "github"))
    if layout.name == "arcflow-sets":
        manifests = [arcflow_ars(f"set{i}", config_url, 0) for i in range(layout.size)]
    else:
        manifests = [arcflow_ars("fleet", config_url, layout.size)]
    await asyncio.gather(*(kube.create(m) for m in manifests))
    for manifest in manifests:
        applied.append(("AutoscalingRunnerSet", NAMESPACE, manifest["metadata"]["name"]))
        for target in demo.variant_targets(manifest):
            layout.targets.append((target.scale_set_name, list(target.job_labels)))
    return applied


async def wait_sessions(layout: Layout, within: float) -> float:
    sim = layout.parts.simulator
    assert sim is not None
    started = time.monotonic()
    names = {name for name, _ in layout.targets}
    while time.monotonic() - started < within:
        sets = {s["name"]: s for s in sim.snapshot()["scaleSets"]}
        if names <= set(sets) and all(sets[n].get("session") for n in names):
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    open_ = sum(1 for s in sim.snapshot()["scaleSets"] if s.get("session"))
    raise TimeoutError(f"{layout.name} N={layout.size}: {open_}/{len(names)} sessions open")


async def count_objects(kube: KubeClient, skip: set[tuple[str, str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for resource in KINDS:
        for obj in (await kube.list(resource)).items:
            meta = obj["metadata"]
            key = (resource.kind, str(meta.get("namespace", "")), str(meta["name"]))
            if key[1] not in (NAMESPACE, CONTROLLER_NAMESPACE) or key in skip:
                continue
            if resource is SERVICE_ACCOUNT and key[2] == "default":
                continue
            counts[resource.kind] = counts.get(resource.kind, 0) + 1
    return counts


def install_objects(layout: Layout) -> set[tuple[str, str, str]]:
    """The controllers' own install identities (not per scale set)."""
    docs: list[dict[str, Any]] = []
    if layout.peer is not None and layout.peer.chart is not None:
        docs = layout.peer.chart.rbac
    else:
        docs = [o for i in layout.parts.identities.values() for o in i.objects]
    return {
        (str(d["kind"]), str(d["metadata"].get("namespace", "")), str(d["metadata"]["name"]))
        for d in docs
    }


async def wait_drained(layout: Layout, jobs: list[str], within: float) -> int:
    """Until every job completed and no runner is left but those stuck in deletion (their
    number)."""
    sim = layout.parts.simulator
    kube = layout.parts.kube
    assert sim is not None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(sim.engine.job(j).state.value == "completed" for j in jobs):
            break
        await asyncio.sleep(0.25)
    else:
        done = sum(1 for j in jobs if sim.engine.job(j).state.value == "completed")
        raise TimeoutError(f"{layout.name}: {done}/{len(jobs)} jobs completed")
    while time.monotonic() < deadline:
        runners = (await kube.list(EPHEMERAL_RUNNER, namespace=NAMESPACE)).items
        pods = [
            p
            for p in (await kube.list(POD, namespace=NAMESPACE)).items
            if classify_pod(p) == "runner"
        ]
        # Upstream v0.27.6 leaves a runner it had already removed from the service stuck in
        # deletion, with its pod (its finalizer's second removal gets 404 and retries for
        # ever: docs/benchmarks/vs-arc.md); those are counted, not waited for.
        stuck = {r["metadata"]["name"] for r in runners if r["metadata"].get("deletionTimestamp")}
        if len(stuck) == len(runners) and all(p["metadata"]["name"] in stuck for p in pods):
            return len(stuck)
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{layout.name}: runners were not cleaned up")


def controller_side_calls(audit: dict[str, Any], peer_user: str | None) -> dict[str, int]:
    """Requests of the controller side's identities, by role: controller(s) and listeners."""
    out: Counter[str] = Counter()
    for user, n in audit["by_user"].items():
        if not user.startswith(IDENTITY_PREFIX):
            continue
        account = user[len(IDENTITY_PREFIX) :]
        if peer_user is not None:
            role = "controller" if user == peer_user else "listener"
        elif account.startswith("arcflow-"):
            role = account.removeprefix("arcflow-")
        else:
            role = "listener"
        out[role] += n
    return dict(out)


async def phase(layout: Layout, mode: str, jobs: int, interval: float) -> dict[str, Any]:
    sim = layout.parts.simulator
    runner = layout.parts.pod_runner
    assert sim is not None
    assert runner is not None
    counter = CountingRequests()
    sim.requests = counter  # type: ignore[assignment]
    seen_pods = {uid for uid, r in runner.records.items() if r.kind == "runner"}
    usage_before = layout.usage()
    nats_before = layout.nats_counts()
    api_before = apiserver_requests(layout.plane)
    since = time.time()
    queued: dict[str, float] = {}
    for index in range(jobs):
        _name, labels = layout.targets[index % len(layout.targets)]
        job_id = sim.enqueue_job(labels, duration=1.0)
        queued[job_id] = time.time()
        if mode == "trickle":
            await asyncio.sleep(interval)
    await wait_drained(layout, list(queued), 600.0)
    await asyncio.sleep(2.0)  # the last deletes' answers
    stuck = await wait_drained(layout, list(queued), 60.0)
    until = time.time()
    api_after = apiserver_requests(layout.plane)
    usage_after = layout.usage()
    nats_after = layout.nats_counts()
    audit = audit_counts(layout.plane.audit_log, since=since, until=until)
    pods = [r for uid, r in runner.records.items() if r.kind == "runner" and uid not in seen_pods]
    pod_of_job = {r.job_id: r.seen_at for r in pods if r.job_id}
    to_pod = [pod_of_job[j] - t for j, t in queued.items() if j in pod_of_job]
    side = controller_side_calls(audit, layout.peer.username if layout.peer else None)
    n_pods = max(1, len(pods))
    return {
        "mode": mode,
        "jobs": jobs,
        "runner_pods": len(pods),
        "jobs_with_pod": len(to_pod),
        "runners_still_deleting": stuck,
        "queued_to_pod": {
            "p50": _round(percentile(to_pod, 0.5)),
            "p95": _round(percentile(to_pod, 0.95)),
            "max": _round(max(to_pod) if to_pod else None),
        },
        "seconds": round(until - since, 1),
        "apiserver_requests": api_after - api_before,
        "apiserver_requests_per_runner": round((api_after - api_before) / n_pods, 2),
        "audit_total": audit["total"],
        "audit_by_user": audit["by_user"],
        "audit_detail_controller_side": {
            u: d for u, d in audit["by_user_verb_resource"].items() if u.startswith(IDENTITY_PREFIX)
        },
        "controller_side_calls": side,
        "controller_side_calls_per_runner": round(sum(side.values()) / n_pods, 2),
        "controller_side_calls_per_runner_by_role": {
            k: round(v / n_pods, 2) for k, v in sorted(side.items())
        },
        "github_requests": counter.total,
        "github_requests_per_job": round(counter.total / max(1, jobs), 2),
        "github_requests_by_route": dict(counter.by_route.most_common(12)),
        "controller_cpu_s": round(
            usage_after["controller_cpu_s"] - usage_before["controller_cpu_s"], 2
        ),
        "listener_cpu_s": round(usage_after["listener_cpu_s"] - usage_before["listener_cpu_s"], 2),
        "controller_cpu_s_by_process": {
            name: round(
                used["cpu_s"] - usage_before["controller_by_process"].get(name, {}).get("cpu_s", 0),
                2,
            )
            for name, used in usage_after["controller_by_process"].items()
        },
        "nats_messages": _nats_delta(nats_before, nats_after),
        "usage_after": usage_after,
    }


def _nats_delta(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Messages the nats-server received and sent during a phase, and those each stream
    stored."""
    if before is None or after is None:
        return None
    stored = {n: seq - before["streams"].get(n, 0) for n, seq in sorted(after["streams"].items())}
    return {
        "in": after["in_msgs"] - before["in_msgs"],
        "out": after["out_msgs"] - before["out_msgs"],
        "stored_by_stream": {n: count for n, count in stored.items() if count},
    }


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float:
    return round(float(after[key]) - float(before[key]), 2)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def one_run(
    name: str,
    size: int,
    work: Path,
    build: upstream_arc.ArcBuild,
    args: argparse.Namespace,
    env: Mapping[str, str],
) -> dict[str, Any]:
    load_at_start = loadavg()
    started = time.monotonic()
    factory, layout = await start_layout(name, size, work, build, args.poll_timeout, env)
    try:
        stack_seconds = time.monotonic() - started
        await asyncio.sleep(2.0)  # the controllers' first lists and watches
        since = time.time()
        api_before = apiserver_requests(layout.plane)
        applied_at = time.monotonic()
        applied = await apply_layout(layout)
        ready = await wait_sessions(layout, args.ready_within)
        await asyncio.sleep(2.0)
        setup_audit = audit_counts(layout.plane.audit_log, since=since)
        setup_api = apiserver_requests(layout.plane) - api_before
        skip = install_objects(layout) | set(applied)
        objects = await count_objects(layout.parts.kube, skip)
        objects_incl_user = await count_objects(layout.parts.kube, install_objects(layout))
        pods = (await layout.parts.kube.list(POD)).items
        usage_setup = layout.usage()
        idle = await idle_phase(layout, args.idle) if args.idle else None
        trickle = await phase(layout, "trickle", args.trickle, args.interval)
        burst = await phase(layout, "burst", args.burst, 0.0)
        result = {
            "layout": name,
            "n": size,
            "loadavg_at_start": load_at_start,
            "stack_start_seconds": round(stack_seconds, 1),
            "setup": {
                "applied_by_user": len(applied),
                "applied_by_user_kinds": dict(Counter(k for k, _, _ in applied)),
                "seconds_to_every_session": round(ready, 1),
                "since_apply_seconds": round(time.monotonic() - applied_at, 1),
                "pods": len(pods),
                "listener_pods": sum(1 for p in pods if classify_pod(p) == "listener"),
                "objects_made_by_controller": objects,
                "objects_made_by_controller_total": sum(objects.values()),
                "objects_total_with_user_applied": sum(objects_incl_user.values()),
                "apiserver_requests": setup_api,
                "controller_side_calls": controller_side_calls(
                    setup_audit, layout.peer.username if layout.peer else None
                ),
                "usage": usage_setup,
            },
            "idle": idle,
            "trickle": trickle,
            "burst": burst,
            "upstream_runner_log": upstream_runner_log(layout),
            "loadavg_when_done": loadavg(),
        }
    finally:
        if layout.peer is not None:
            layout.peer.stop()
        await factory.aclose()
    return result


async def idle_phase(layout: Layout, seconds: float) -> dict[str, Any]:
    """Nothing queued for ``seconds`` after setup: CPU seconds per minute of the controller
    side (by process) and of the listeners, what a fleet costs while it waits for jobs."""
    before = layout.usage()
    await asyncio.sleep(seconds)
    after = layout.usage()
    per_minute = 60.0 / seconds

    def rate(a: float, b: float) -> float:
        return round((b - a) * per_minute, 3)

    return {
        "seconds": seconds,
        "controller_cpu_s_per_minute": rate(before["controller_cpu_s"], after["controller_cpu_s"]),
        "controller_cpu_s_per_minute_by_process": {
            name: rate(before["controller_by_process"][name]["cpu_s"], use["cpu_s"])
            for name, use in after["controller_by_process"].items()
            if name in before["controller_by_process"]
        },
        "listener_cpu_s_per_minute": rate(before["listener_cpu_s"], after["listener_cpu_s"]),
    }


def upstream_runner_log(layout: Layout) -> dict[str, int] | None:
    """From upstream's controller log: EphemeralRunners created, idle ones it removed, and
    the distinct runners whose second removal from the service failed (stuck in deletion for
    good; ``runners_still_deleting`` of a phase also counts slow but normal deletions)."""
    if layout.peer is None or layout.peer.controller is None:
        return None
    text = layout.peer.controller.log_path.read_text(errors="replace")
    failed = set()
    for line in text.splitlines():
        if "Failed clean up runner from the service" in line and '"ephemeralrunner": "' in line:
            failed.add(line.split('"ephemeralrunner": "', 1)[1].split('"', 1)[0])
    return {
        "ephemeral_runners_created": text.count("Created new ephemeral runner"),
        "idle_runners_removed": text.count("Removing the idle ephemeral runner"),
        "runners_with_a_failed_second_removal": len(failed),
    }


def shown(run: dict[str, Any]) -> str:
    """The layout's name, with its side when the invocation compared two commits."""
    return f"{run['layout']} ({run['side']})" if run.get("side") else str(run["layout"])


def _order(run: dict[str, Any]) -> tuple[int, int, int, int]:
    side = {"before": 0, "after": 1}.get(run.get("side") or "", 0)
    return run["n"], LAYOUTS.index(run["layout"]), side, run["run"]


def summary_line(run: dict[str, Any]) -> str:
    s, t, b = run["setup"], run["trickle"], run["burst"]
    return (
        f"{shown(run):17} N={run['n']:3} load {run['loadavg_at_start'][0]:5.2f} "
        f"sessions {s['seconds_to_every_session']:6.1f}s pods {s['pods']:3} "
        f"objects {s['objects_total_with_user_applied']:4} | trickle p50/p95/max "
        f"{t['queued_to_pod']['p50']}/{t['queued_to_pod']['p95']}/{t['queued_to_pod']['max']} "
        f"api/runner {t['apiserver_requests_per_runner']} "
        f"side {t['controller_side_calls_per_runner']} "
        f"gh/job {t['github_requests_per_job']} | burst p50/p95/max "
        f"{b['queued_to_pod']['p50']}/{b['queued_to_pod']['p95']}/{b['queued_to_pod']['max']} "
        f"pods {b['runner_pods']} api/runner {b['apiserver_requests_per_runner']} "
        f"side {b['controller_side_calls_per_runner']} gh/job {b['github_requests_per_job']} | "
        f"ctrl {b['usage_after']['controller_rss_mib']} MiB listeners "
        f"{b['usage_after']['listener_rss_mib']} MiB"
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def report(payload: dict[str, Any]) -> str:
    """The Markdown tables of docs/benchmarks/vs-arc.md, from a result file."""
    rows = [r for r in payload["runs"] if "error" not in r]
    head = (
        "| N | layout | run | load | pods | objects (controller-made / with user-applied) "
        "| every session open | controller RSS / CPU s | listeners RSS / CPU s |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    setup = head
    for r in sorted(rows, key=_order):
        s, b = r["setup"], r["burst"]
        u = b["usage_after"]
        setup += (
            f"| {r['n']} | {shown(r)} | {r['run']} | {r['loadavg_at_start'][0]:.1f} "
            f"| {s['pods']} | {s['objects_total_with_user_applied'] - s['applied_by_user']} / "
            f"{s['objects_total_with_user_applied']} | {s['seconds_to_every_session']:.1f} s "
            f"| {u['controller_rss_mib']:.0f} MiB / {u['controller_cpu_s']:.1f} "
            f"| {u['listener_rss_mib']:.0f} MiB / {u['listener_cpu_s']:.1f} |\n"
        )
    work = (
        "| N | layout | run | phase | pods / jobs | queued -> pod p50 / p95 / max "
        "| API requests / runner (server) | controller side / runner (audit) "
        "| GitHub requests / job | CPU s controller + listeners | runners still deleting |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    for r in sorted(rows, key=_order):
        for name in ("trickle", "burst"):
            p = r[name]
            q = p["queued_to_pod"]
            work += (
                f"| {r['n']} | {shown(r)} | {r['run']} | {name} "
                f"| {p['runner_pods']} / {p['jobs']} "
                f"| {_fmt(q['p50'])} / {_fmt(q['p95'])} / {_fmt(q['max'])} s "
                f"| {_fmt(p['apiserver_requests_per_runner'])} "
                f"| {_fmt(p['controller_side_calls_per_runner'])} "
                f"| {_fmt(p['github_requests_per_job'])} "
                f"| {_fmt(p['controller_cpu_s'])} + {_fmt(p['listener_cpu_s'])} "
                f"| {p.get('runners_still_deleting', p.get('runners_stuck_in_deletion', 0))} |\n"
            )
    errors = [r for r in payload["runs"] if "error" in r]
    tail = "".join(f"- run {r['run']} N={r['n']} {r['layout']}: {r['error']}\n" for r in errors)
    return setup + "\n" + work + ("\nFailed runs:\n" + tail if tail else "")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="3,88", help="comma-separated N (default 3,88)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--trickle", type=int, default=30, help="trickle jobs (default 30)")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="seconds of an idle phase after setup (CPU per minute while nothing is queued); "
        "0: none",
    )
    parser.add_argument("--poll-timeout", type=float, default=50.0)
    parser.add_argument("--ready-within", type=float, default=600.0)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--max-load",
        type=float,
        default=2.5,
        help="wait (up to 10 min) before each layout run until the 1-minute load is under "
        "this; 0: no",
    )
    parser.add_argument(
        "--before-rev",
        help="also run the arcflow layouts on this commit's services and listener (exported "
        "from git onto their PYTHONPATH), alternated with this checkout's; upstream runs once "
        "per run",
    )
    parser.add_argument("--report", help="print the Markdown tables of a result file, run nothing")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(Path(args.report).read_text())))  # noqa: ASYNC240
        return 0
    sizes = [int(x) for x in args.sizes.split(",") if x]
    layouts = [x for x in args.layouts.split(",") if x]
    problem = upstream_arc.check_mount_namespaces() if "upstream" in layouts else None
    if problem:
        print(f"vs_arc: {problem}", file=sys.stderr)
        return 2
    build = upstream_arc.locate_arc()
    base = Path(tempfile.mkdtemp(prefix="arcflow-vs-arc-"))
    print(f"work folder: {base}", flush=True)
    payload: dict[str, Any] = {
        "machine": machine(),
        "arc_module_version": build.version,
        "args": vars(args),
        "order": [],
        "runs": [],
    }
    sides: dict[str, dict[str, str]] = {"": {}}
    if args.before_rev:
        from one_trigger import export_tree, pythonpath

        sides = {"before": {"PYTHONPATH": pythonpath(export_tree(args.before_rev))}, "after": {}}
        payload["before_rev"] = args.before_rev
    name = "vs-arc" + (f"-{args.label}" if args.label else "")
    for run_index in range(args.runs):
        for size in sizes:
            for layout in layouts:
                for side, env in sides.items() if layout != "upstream" else [("", {})]:
                    work = base / f"r{run_index}-n{size}-{layout}{'-' + side if side else ''}"
                    payload["order"].append(f"run {run_index + 1} N={size} {layout} {side}")
                    if args.max_load:
                        wait_quiet(args.max_load)
                    try:
                        result = await one_run(layout, size, work, build, args, env)
                    except Exception as exc:
                        result = {
                            "layout": layout,
                            "n": size,
                            "error": f"{type(exc).__name__}: {exc}"[:500],
                        }
                        print(f"{layout} {side} N={size}: {result['error']}", flush=True)
                    else:
                        result["side"] = side or None
                        print(summary_line(result), flush=True)
                    result["run"] = run_index + 1
                    payload["runs"].append(result)
                    payload["loadavg_at_end"] = loadavg()
                    out = write_result(name, payload)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
