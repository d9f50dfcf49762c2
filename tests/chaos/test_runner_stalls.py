"""Runners that stall or go missing (ADR 0065), one fault per test, on the real control plane:

* an image that never pulls on one variant mid-burst: that variant's pods are recreated with a
  ``RunnerPodStuck`` Warning Event naming the stage and the kubelet's reason, its siblings'
  jobs all run, and the alert expressions hold on a real scrape of the stack's endpoints (the
  same scrape on which every metric and label the dashboard and the rules use is carried);
* a node that goes away with runners on it: its runner pods are replaced on a live node;
* runners left registered on the simulator after their EphemeralRunners and pods were deleted
  behind arcflow's back: removed, never a busy one; and an EphemeralRunner whose GitHub runner
  was removed behind its back: cleaned up and replaced.

The alert expressions are evaluated by :func:`tests.chaos.promql.evaluate` over two scrapes
(the range functions compare them), not by a Prometheus: the test says which series each
alert selects, which is what an alert's ``for`` then waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.kube import EPHEMERAL_RUNNER, EVENT, POD, KubeClient, NotFoundError
from arcflow.devstack.control_plane import ControlPlane
from deploy.tests.helpers import HELM_DIR, ensure_helm
from tests.chaos.harness import ARS_NAME, ChaosStack
from tests.chaos.outcome import Burst
from tests.chaos.promql import (
    Scrape,
    dashboard_queries,
    evaluate,
    fetch,
    parse_exposition,
    rendered_monitoring,
    unknown_names,
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


def scrape_urls(stack: ChaosStack) -> list[str]:
    urls = [f"http://127.0.0.1:{s.metrics_port}/metrics" for s in stack.services.values()]
    for config in sorted((stack.work_dir / "pods").glob("*/config.json")):
        addr = json.loads(config.read_text()).get("metrics_addr") or ""
        if addr:
            urls.append(f"http://{addr}/metrics")
    return urls


def scrape(stack: ChaosStack) -> Scrape:
    texts: list[str] = []
    for url in scrape_urls(stack):
        try:
            texts.extend(fetch([url]))
        except OSError:
            continue  # a listener process of an earlier pod, gone since
    return parse_exposition(texts, time.time())


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
    tmp_path: Path, chaos_kube: ControlPlane | str
) -> None:
    async with ChaosStack(tmp_path, chaos_kube, ars_edit=gpu_variant_never_pulls) as stack:
        assert stack.kube is not None
        assert stack.pod_runner is not None
        kube, namespace = stack.kube, stack.namespace
        burst = Burst(stack)
        burst.enqueue(6)
        await burst.wait_completed(6, within=120)
        before = scrape(stack)

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
                e["metadata"]["name"]: len((e.get("status") or {}).get("failures") or {})
                for e in ers
            }
            return counts if any(n and "-gpu-" in name for name, n in counts.items()) else {}

        failures = await wait_for("a gpu runner's failure recorded", failures_recorded, 30)
        assert all(n == 0 for name, n in failures.items() if "-gpu-" not in name), failures
        assert all(engine.job(j).state.value != "completed" for j in gpu_jobs)

        after = scrape(stack)
        for name, taken in (("before", before), ("after", after)):  # kept with the test's logs
            (tmp_path / f"scrape-{name}.json").write_text(
                json.dumps(
                    {
                        "at": taken.at,
                        "samples": [[n, list(k), v] for (n, k), v in taken.samples.items()],
                    }
                )
            )
        # The alerts, evaluated on the real scrape: stuck pods on gpu only, jobs assigned to
        # the gpu scale set and not started, every variant with its session.
        dashboard, alerts = rendered_monitoring(ensure_helm(), HELM_DIR / "arcflow", tmp_path)
        stuck = evaluate(alerts["ArcflowRunnerPodStuck"], after, before)
        assert stuck, "ArcflowRunnerPodStuck selects nothing on the scrape"
        assert {dict(k)["variant"] for k in stuck} == {"gpu"}, stuck
        assert {dict(k)["stage"] for k in stuck} == {"ImagePull"}, stuck
        waiting = evaluate(alerts["ArcflowJobsAssignedNotStarted"], after, before)
        assert {dict(k)["name"] for k in waiting} == {f"{ARS_NAME}-gpu"}, waiting
        assert evaluate(alerts["ArcflowScaleSetWithoutSession"], after, before) == {}
        # Every metric and label the dashboard and the rules use is on a scraped series.
        problems = [
            p
            for where, query in [
                *dashboard_queries(dashboard),
                *((f"alert {name}", expr) for name, expr in alerts.items()),
            ]
            for p in unknown_names(where, query, after)
            if not any(f"no series {name}" in p for name in FIRST_EVENT_ONLY)
        ]
        assert problems == [], "\n".join(problems)
        stages = {
            dict(k).get("stage") for (n, k) in after.samples if n.startswith("arcflow_runner_stage")
        }
        print(
            json.dumps(
                {
                    "reaped": len(events),
                    "failures": failures,
                    "stages": sorted(s for s in stages if s),
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
