"""Runners that stall or go missing (ADR 0065), one fault per test, on the real control plane:

* an image that never pulls on one variant mid-burst: that variant's pods are recreated with a
  ``RunnerPodStuck`` Warning Event naming the stage and the kubelet's reason, its siblings'
  jobs all run, and a real Prometheus (ADR 0068) scraping the stack's endpoints (the services'
  and the listener pod's) with the chart's rules loaded fires the stuck-pod alert for that
  variant only; every dashboard panel, variable and rule expression runs on it without error,
  and every metric and label they use is on a series it scraped;
* a node that goes away with runners on it: its runner pods are replaced on a live node;
* runners left registered on the simulator after their EphemeralRunners and pods were deleted
  behind arcflow's back: removed, never a busy one; and an EphemeralRunner whose GitHub runner
  was removed behind its back: cleaned up and replaced.

Of the alerts, ``ArcflowRunnerPodStuck`` has no ``for`` and ``ArcflowJobsAssignedNotStarted``
takes the chart's ``jobStartThreshold`` (rendered as 2s here), so both are asserted as
Prometheus' own firing alerts. The others wait 5 min or more (``for``), so their expressions
are evaluated through the query API instead: what the alert would wait on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.kube import EPHEMERAL_RUNNER, EVENT, POD, KubeClient, NotFoundError
from arcflow.common.naming import listener_name
from arcflow.devstack.control_plane import ControlPlane
from deploy.tests.helpers import HELM_DIR, ensure_helm
from tests.chaos.harness import ARS_NAME, ChaosStack
from tests.chaos.outcome import Burst
from tests.chaos.promql import by_name, unknown_names
from tests.fixtures.prometheus import (
    LISTENER_JOB,
    Prometheus,
    PrometheusError,
    StartPrometheus,
    alert_expressions,
    dashboard_queries,
    rendered_monitoring,
    write_rule_file,
)

pytestmark = [pytest.mark.chaos, pytest.mark.scenario, pytest.mark.timeout(420)]

NEVER_PULLS = "registry.example/gpu-runner:never"
FAST_ORPHAN_SCAN = {
    "ARCFLOW_RECONCILER_ORPHAN_SCAN_SECONDS": "2",
    "ARCFLOW_RECONCILER_ORPHAN_GRACE_SECONDS": "3",
}
#: Counters that exist only after their first event, and none happens in a healthy run.
FIRST_EVENT_ONLY = {
    "arcflow_registrar_errors_total",
    "arcflow_reconciler_errors_total",
}


async def wait_for(what: str, check: Callable[[], Awaitable[Any]], within: float) -> Any:
    began = time.monotonic()
    last: Any = None
    while time.monotonic() - began < within:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"not within {within}s: {what} (last seen: {last!r})")


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.5):
        return True
    return False


def listener_addresses(stack: ChaosStack) -> list[str]:
    """The metrics endpoints of the listener pods' processes that run now."""
    addresses = []
    for config in sorted((stack.work_dir / "pods").glob("*/config.json")):
        addr = json.loads(config.read_text()).get("metrics_addr") or ""
        if addr and _answers(addr):
            addresses.append(addr)
    return addresses


def scrape_jobs(stack: ChaosStack) -> dict[str, list[str]]:
    """A job per service (as a ServiceMonitor gives each metrics Service), and the listener
    pods under the PodMonitor's job name, which ``ArcflowListenerNotScraped`` selects."""
    jobs = {f"arcflow-{n}": [f"127.0.0.1:{s.metrics_port}"] for n, s in stack.services.items()}
    jobs[LISTENER_JOB] = listener_addresses(stack)
    return jobs


async def follow_listeners(stack: ChaosStack, prom: Prometheus) -> None:
    """Keeps the listener job's targets on the listener processes that run (pod discovery)."""
    while True:
        prom.set_targets(LISTENER_JOB, await asyncio.to_thread(listener_addresses, stack))
        await asyncio.sleep(1)


async def active_alerts(prom: Prometheus, name: str, state: str = "firing") -> list[dict[str, str]]:
    return [
        a["labels"]
        for a in await prom.alerts()
        if a["labels"]["alertname"] == name and a["state"] == state
    ]


def _regex_of(values: list[str]) -> str:
    """Grafana's "All" of a multi-value variable, for Prometheus: ``(a|b)``, each value's
    regex characters escaped, and each backslash doubled for the PromQL string literal."""
    escaped = (re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", v) for v in values)
    return "(" + "|".join(e.replace("\\", "\\\\") for e in escaped) + ")"


async def dashboard_on_prometheus(
    prom: Prometheus, dashboard: dict[str, Any]
) -> tuple[dict[str, list[str]], dict[str, list[dict[str, Any]]]]:
    """The dashboard as Grafana shows it with "All" chosen: each ``label_values`` variable
    resolved by Prometheus (in order, later ones using earlier ones), then every panel target
    run with the variables put in. Returns the variables' values and each target's result."""
    variables: dict[str, list[str]] = {}

    def put_in(expr: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: _regex_of(variables.get(m.group(1), [])), expr)

    for variable in (dashboard.get("templating") or {}).get("list") or []:
        found = re.fullmatch(
            r"label_values\((.*),\s*(\w+)\)", str(variable.get("definition") or "").strip()
        )
        if found:
            values = await prom.label_values(found.group(2), put_in(found.group(1)))
            variables[variable["name"]] = values
    results, errors = {}, []
    for where, expr in dashboard_queries(dashboard):
        if where.startswith("panel "):
            try:
                results[f"{where}: {expr}"] = await prom.query(put_in(expr))
            except PrometheusError as exc:
                errors.append(f"{where}: {exc}")
    assert errors == [], "panels Prometheus cannot run:\n" + "\n".join(errors)
    return variables, results


async def stuck_events(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    events = (await kube.list(EVENT, namespace=namespace)).items
    return [e for e in events if e.get("reason") == "RunnerPodStuck"]


def gpu_variant_never_pulls(ars: dict[str, Any]) -> None:
    """The gpu variant gets its own image and a 4 s image-pull deadline (the ARS annotation
    of that variant); the others keep the defaults."""
    template = json.loads(json.dumps(ars["spec"]["template"]))
    template["spec"]["containers"][0]["image"] = NEVER_PULLS
    for variant in ars["spec"]["runnerVariants"]:
        if variant["name"] == "gpu":
            variant["template"] = template
    ars["metadata"]["annotations"] = {"arcflow.dev/runner-deadlines.gpu": "imagePull=4s"}


async def test_an_image_that_never_pulls_on_one_variant_mid_burst(
    tmp_path: Path, chaos_kube: ControlPlane | str, prometheus: StartPrometheus
) -> None:
    # The chart's rules as the Prometheus Operator would load them; the job-start threshold
    # short, so that alert fires within the test.
    dashboard, rule = rendered_monitoring(
        ensure_helm(), HELM_DIR / "arcflow", tmp_path, {"jobStartThreshold": "2s"}
    )
    alerts = alert_expressions(rule)
    assert f'job="{LISTENER_JOB}"' in alerts["ArcflowListenerNotScraped"], alerts
    rule_file = write_rule_file(rule, tmp_path / "arcflow-rules.yml")
    async with ChaosStack(tmp_path, chaos_kube, ars_edit=gpu_variant_never_pulls) as stack:
        assert stack.kube is not None
        assert stack.pod_runner is not None
        kube, namespace = stack.kube, stack.namespace
        prom = prometheus(scrape_jobs(stack), [rule_file])
        following = asyncio.create_task(follow_listeners(stack, prom))
        try:
            for job in scrape_jobs(stack):
                await prom.wait_scraped(job)
            await check_never_pulls(stack, kube, namespace, prom, dashboard, alerts)
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following


async def check_never_pulls(
    stack: ChaosStack,
    kube: KubeClient,
    namespace: str,
    prom: Prometheus,
    dashboard: dict[str, Any],
    alerts: dict[str, str],
) -> None:
    assert stack.pod_runner is not None
    burst = Burst(stack)
    burst.enqueue(6)
    await burst.wait_completed(6, within=120)

    stack.pod_runner.unpullable_images.append("*/gpu-runner:never")  # mid-burst
    added = burst.enqueue(12)
    siblings = [j for j in added if burst.jobs[j] != "gpu"]
    gpu_jobs = [j for j in added if burst.jobs[j] == "gpu"]
    assert stack.sim is not None
    engine = stack.sim.engine

    async def siblings_done() -> bool:
        return all(engine.job(j).state.value == "completed" for j in siblings)

    async def two_reaped() -> list[dict[str, Any]]:
        events = await stuck_events(kube, namespace)
        return events if len({e["involvedObject"]["name"] for e in events}) >= 2 else []

    await wait_for("the small and large jobs completed", siblings_done, 120)
    events = await wait_for("two gpu runners' pods recreated with an Event", two_reaped, 120)
    for event in events:
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "EphemeralRunner"
        assert event["involvedObject"]["name"].startswith(f"{ARS_NAME}-gpu-"), event
        assert event["message"].startswith("ImagePull: runner pod stuck in ImagePull ("), event
        assert "ImagePullBackOff" in event["message"] or "ErrImagePull" in event["message"]

    async def failures_recorded() -> dict[str, int]:
        ers = (await kube.list(EPHEMERAL_RUNNER, namespace=namespace)).items
        counts = {
            e["metadata"]["name"]: len((e.get("status") or {}).get("failures") or {}) for e in ers
        }
        return counts if any(n and "-gpu-" in name for name, n in counts.items()) else {}

    failures = await wait_for("a gpu runner's failure recorded", failures_recorded, 30)
    assert all(n == 0 for name, n in failures.items() if "-gpu-" not in name), failures
    assert all(engine.job(j).state.value != "completed" for j in gpu_jobs)

    # The alerts, in the real Prometheus: stuck pods firing on gpu only (the counter series of
    # gpu appears at its first reap, so Prometheus sees an increase from the next one on).
    began = time.monotonic()
    stuck = await wait_for(
        "ArcflowRunnerPodStuck firing in Prometheus",
        lambda: active_alerts(prom, "ArcflowRunnerPodStuck"),
        90,
    )
    fired_after = round(time.monotonic() - began, 1)
    assert {a["variant"] for a in stuck} == {"gpu"}, stuck
    assert {a["stage"] for a in stuck} == {"ImagePull"}, stuck
    assert {a["namespace"] for a in stuck} == {namespace}, stuck
    stuck_now = await prom.query(alerts["ArcflowRunnerPodStuck"])
    assert {s["metric"]["variant"] for s in stuck_now} == {"gpu"}, stuck_now
    pending = await active_alerts(prom, "ArcflowRunnerPodStuck", "pending")
    assert all(a["variant"] == "gpu" for a in pending), pending

    async def only_gpu_waits() -> list[dict[str, str]]:
        waiting = await active_alerts(prom, "ArcflowJobsAssignedNotStarted")
        return waiting if {a["name"] for a in waiting} == {f"{ARS_NAME}-gpu"} else []

    await wait_for("ArcflowJobsAssignedNotStarted firing for gpu only", only_gpu_waits, 60)
    # The alerts with a long ``for``: their expressions, evaluated now.
    assert await prom.query(alerts["ArcflowScaleSetWithoutSession"]) == []
    assert await prom.query(alerts["ArcflowListenerNotScraped"]) == []
    # The reconciler reports every listener in the cluster; the control plane is shared by the
    # tests of this worker, whose sets are all named ARS_NAME (a listener left by an earlier
    # test's set may be down), so only this set's listener, named after its namespace, is judged.
    own = listener_name(ARS_NAME, namespace, "", stack.sim.config_url())
    down = await prom.query(alerts["ArcflowListenerDown"])
    assert [s for s in down if s["metric"].get("name") == own] == [], down
    assert await prom.query(f'up{{job="{LISTENER_JOB}"}} == 1'), "no listener target is up"

    # Every dashboard panel and variable and every rule runs on Prometheus; a panel shows
    # something unless it reads a counter of an event that never happened here.
    variables, panels = await dashboard_on_prometheus(prom, dashboard)
    assert variables["namespace"] == [namespace], variables
    variants = sorted(f"{ARS_NAME}-{t.variant}" for t in stack.targets)
    assert sorted(variables["variant"]) == variants, variables
    empty = [
        where
        for where, result in panels.items()
        if not result and not any(name in where for name in FIRST_EVENT_ONLY)
    ]
    assert empty == [], "panels with nothing to show:\n" + "\n".join(empty)
    errors = []
    for name, expr in alerts.items():
        try:
            await prom.query(expr)
        except PrometheusError as exc:
            errors.append(f"alert {name}: {exc}")
    assert errors == [], "\n".join(errors)
    # Every metric and label the dashboard and the rules use is on a scraped series.
    names = by_name(await prom.series('{__name__=~".+"}'))
    problems = [
        p
        for where, query in [
            *dashboard_queries(dashboard),
            *((f"alert {name}", expr) for name, expr in alerts.items()),
        ]
        for p in unknown_names(where, query, names)
        if not any(f"no series {name}" in p for name in FIRST_EVENT_ONLY)
    ]
    assert problems == [], "\n".join(problems)
    stages = {
        labels.get("stage")
        for name, series in names.items()
        if name.startswith("arcflow_runner_stage")
        for labels in series
    }
    print(
        json.dumps(
            {
                "reaped": len(events),
                "failures": failures,
                "stages": sorted(s for s in stages if s),
                "stuck alerts": stuck,
                "firing after the reap checks (s)": fired_after,
            }
        )
    )

    stack.pod_runner.unpullable_images.clear()  # the registry is back

    async def gpu_done() -> bool:
        return all(engine.job(j).state.value == "completed" for j in gpu_jobs)

    await wait_for("the gpu jobs ran once the image pulls again", gpu_done, 200)


async def test_a_node_that_goes_away_with_runners_on_it(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    if chaos_kube == "emulator":
        pytest.skip("Nodes, Leases and the node lifecycle controller need the real control plane")

    def idle_runners_and_fast_node_loss(ars: dict[str, Any]) -> None:
        ars["spec"]["minRunners"] = 1
        ars["metadata"]["annotations"] = {"arcflow.dev/runner-deadlines": "nodeLost=3s"}

    async with ChaosStack(tmp_path, chaos_kube, ars_edit=idle_runners_and_fast_node_loss) as stack:
        assert stack.kube is not None
        assert stack.pod_runner is not None
        kube, namespace = stack.kube, stack.namespace

        async def runner_pods() -> list[dict[str, Any]]:
            pods = (await kube.list(POD, namespace=namespace)).items
            return [
                p
                for p in pods
                if (p["metadata"].get("labels") or {}).get("actions-ephemeral-runner") == "True"
                and (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ]

        async def three_running() -> list[dict[str, Any]]:
            pods = await runner_pods()
            return pods if len(pods) >= 3 else []

        on_old = await wait_for("an idle runner of each variant running", three_running, 120)
        old_node = await stack.pod_runner.lose_node()
        assert old_node is not None
        assert {p["spec"].get("nodeName") for p in on_old} == {old_node}
        old_names = {p["metadata"]["name"] for p in on_old}

        async def replaced() -> list[dict[str, Any]]:
            pods = await runner_pods()
            moved = [p for p in pods if p["spec"].get("nodeName") not in (None, old_node)]
            left = [
                p
                for p in (await kube.list(POD, namespace=namespace)).items
                if p["spec"].get("nodeName") == old_node
                and "actions-ephemeral-runner" in (p["metadata"].get("labels") or {})
            ]
            return moved if len(moved) >= 3 and not left else []

        # The node lifecycle controller's grace period (about 40-50 s), then ours (3 s).
        moved = await wait_for("the runners running again on a live node", replaced, 240)
        events = await stuck_events(kube, namespace)
        lost = {e["involvedObject"]["name"] for e in events if e["message"].startswith("NodeLost")}
        assert lost >= old_names, (lost, old_names)
        # Jobs run on the replacements.
        burst = Burst(stack)
        burst.enqueue(3)
        await burst.wait_completed(3, within=120)
        print(
            json.dumps(
                {"lost node": old_node, "replaced": sorted(p["metadata"]["name"] for p in moved)}
            )
        )


async def test_runners_left_registered_after_their_objects_went_behind_arcflows_back(
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    def two_idle_runners(ars: dict[str, Any]) -> None:
        ars["spec"]["minRunners"] = 2

    async with ChaosStack(
        tmp_path, chaos_kube, ars_edit=two_idle_runners, service_env_extra=FAST_ORPHAN_SCAN
    ) as stack:
        assert stack.kube is not None
        assert stack.sim is not None
        kube, namespace, engine = stack.kube, stack.namespace, stack.sim.engine
        small = next(t for t in stack.targets if t.variant == "small")
        set_id = stack.scale_set_id(small)

        def registered() -> dict[str, int]:
            return {r.name: r.id for r in engine.runners.values() if r.scale_set_id == set_id}

        async def two_registered() -> dict[str, int]:
            return registered() if len(registered()) >= 2 else {}

        await wait_for("two small runners registered", two_registered, 120)
        # One of them takes a long job: busy on GitHub.
        busy_job = stack.sim.enqueue_job(small.job_labels, duration=120.0)

        async def busy_runner() -> str | None:
            job = engine.job(busy_job)
            return job.runner_id and next(
                (r.name for r in engine.runners.values() if r.id == job.runner_id), None
            )

        busy_name = await wait_for("the long job running on a small runner", busy_runner, 120)
        before = registered()
        # Behind arcflow's back (its reconciler stopped, SIGSTOP): the small runners'
        # EphemeralRunners lose their finalizers and go, with their pods, while GitHub keeps
        # them registered.
        reconciler = stack.services["reconciler"].process.process
        assert reconciler is not None
        os.kill(reconciler.pid, signal.SIGSTOP)
        try:
            for name in before:
                with contextlib.suppress(NotFoundError):
                    await kube.patch_merge(
                        EPHEMERAL_RUNNER,
                        name,
                        {"metadata": {"finalizers": None}},
                        namespace=namespace,
                    )
                    await kube.delete(EPHEMERAL_RUNNER, name, namespace=namespace)
                with contextlib.suppress(NotFoundError):  # the collector may be first
                    await kube.delete(POD, name, namespace=namespace, grace_period_seconds=0)

            async def objects_gone() -> bool:
                left = (await kube.list(EPHEMERAL_RUNNER, namespace=namespace)).items
                return not {e["metadata"]["name"] for e in left} & set(before)

            await wait_for("the small runners' EphemeralRunners gone", objects_gone, 30)
        finally:
            os.kill(reconciler.pid, signal.SIGCONT)
        assert registered().keys() >= before.keys(), "GitHub lost a runner by itself"

        async def idle_orphans_removed() -> bool:
            now = registered()
            return all(name not in now for name in before if name != busy_name)

        await wait_for("the idle orphaned runners removed from GitHub", idle_orphans_removed, 60)
        assert busy_name in registered(), "the busy orphaned runner was removed"
        assert engine.job(busy_job).state.value == "running"

        # The other direction: a runner removed on GitHub behind arcflow's back.
        async def replaced_idle() -> dict[str, int]:
            now = {n: i for n, i in registered().items() if n not in before}
            return now if len(now) >= 2 else {}

        fresh = await wait_for("two fresh small runners", replaced_idle, 120)
        victim, victim_id = sorted(fresh.items())[0]
        stack.sim.engine.remove_runner(victim_id)

        async def victim_cleaned_up() -> bool:
            names = {
                e["metadata"]["name"]
                for e in (await kube.list(EPHEMERAL_RUNNER, namespace=namespace)).items
            }
            return victim not in names

        await wait_for(
            "the EphemeralRunner whose GitHub runner is gone cleaned up", victim_cleaned_up, 60
        )
        burst = Burst(stack)
        burst.enqueue(3)
        await burst.wait_completed(3, within=120)
        print(json.dumps({"busy kept": busy_name, "cleaned up": victim}))
