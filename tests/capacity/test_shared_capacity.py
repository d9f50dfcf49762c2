"""Shared capacity and drain end to end (ADR 0062), on the real control plane.

One ARS with three variants behind one listener, ``capacity.maxRunners: 6`` (or a CPU budget
with mixed pod shapes), a burst of 40 jobs. Watched at every moment: runner pods by a watch,
jobs the set's scale sets held together by the simulator's own history (over HTTP).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from arcflow.common.constants import LABEL_RUNNER_VARIANT
from arcflow.common.kube import EPHEMERAL_RUNNER, POD
from arcflow.devstack.control_plane import ControlPlane
from tests.capacity.harness import CapacityStack, runner_template
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.scenario, pytest.mark.timeout(420)]


@pytest.fixture
def plane(request: pytest.FixtureRequest) -> ControlPlane:
    if backend() != APISERVER or real_kubeconfig():
        pytest.skip("needs the session's own control plane")
    found: ControlPlane = request.getfixturevalue("control_plane")
    return found


def three_variants(capacity: dict[str, Any], **variant_extra: dict[str, Any]) -> dict[str, Any]:
    variants = []
    for name in ("alpha", "beta", "gamma"):
        entry: dict[str, Any] = {"name": name, "runnerScaleSetLabels": [name]}
        entry.update(variant_extra.get(name, {}))
        variants.append(entry)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "shared"},
        "spec": {
            "githubConfigUrl": "",
            "githubConfigSecret": "",
            "minRunners": 0,
            "maxRunners": 40,
            "template": runner_template(),
            "capacity": capacity,
            "runnerVariants": variants,
        },
    }


async def finish_times(
    stack: CapacityStack, job_ids: dict[str, list[str]], within: float
) -> dict[str, list[float]]:
    """Wait until every job in ``job_ids`` completed; variant -> when each was seen done."""
    seen: dict[str, float] = {}
    variant_of = {j: v for v, ids in job_ids.items() for j in ids}
    began = time.monotonic()
    deadline = began + within
    while True:
        jobs = await stack.jobs()
        now = time.monotonic() - began
        for job_id in variant_of:
            if job_id not in seen and jobs[job_id]["state"] == "completed":
                seen[job_id] = now
        if len(seen) == len(variant_of):
            break
        if time.monotonic() > deadline:
            left = {v: sum(1 for j in ids if j not in seen) for v, ids in job_ids.items()}
            raise AssertionError(f"jobs not completed within {within}s: {left}")
        await asyncio.sleep(0.1)
    results = {j: jobs[j]["result"] for j in variant_of}
    assert set(results.values()) == {"succeeded"}, results
    out: dict[str, list[float]] = {v: [] for v in job_ids}
    for job_id, at in seen.items():
        out[variant_of[job_id]].append(at)
    return out


async def test_six_runners_for_three_variants_and_forty_jobs(
    tmp_path: Path, plane: ControlPlane
) -> None:
    ars = three_variants(
        {"maxRunners": 6},
        alpha={"priority": 10},
        beta={"priority": 1},
        gamma={"priority": 1},
    )
    async with CapacityStack(tmp_path, plane, ars) as stack:
        stack.sim.engine.mode = "acquire"  # type: ignore[union-attr]  # waiting jobs visible
        jobs = {
            "alpha": await stack.enqueue("alpha", 14, 1.0),
            "beta": await stack.enqueue("beta", 13, 1.0),
            "gamma": await stack.enqueue("gamma", 13, 1.0),
        }
        done = await finish_times(stack, jobs, within=300)
        peak = await stack.active_peak()
        assert stack.pods is not None
        print(
            f"assigned peak {peak}, pod peak {stack.pods.peak_pods} "
            f"({stack.pods.events} pod events), finish medians "
            + ", ".join(f"{v}={statistics.median(t):.1f}s" for v, t in done.items())
        )
        assert peak["changes"] >= 80  # 40 jobs assigned and completed at least once
        assert peak["peak"] <= 6, peak
        assert stack.pods.peak_pods <= 6
        assert sum(len(t) for t in done.values()) == 40
        # The higher priority gets its share first: its jobs are done while the others wait.
        assert max(done["alpha"]) < statistics.median(done["beta"])
        assert max(done["alpha"]) < statistics.median(done["gamma"])
        status = (await stack.ars_doc()).get("status") or {}
        capacity = status.get("capacity") or {}
        assert capacity.get("total", {}).get("runners") == "6", status
        assert {v["name"] for v in capacity.get("variants", [])} == {"alpha", "beta", "gamma"}


async def test_a_backlog_queued_before_the_set_exists_stays_within_the_budget(
    tmp_path: Path, plane: ControlPlane
) -> None:
    """A team moves a backlog onto a new set: 40 jobs are queued before the ARS is applied, so
    GitHub assigns them before any first poll has advertised a capacity. No more than 6 runner
    pods exist at any moment all the same (ADR 0090), every job runs as slots free up, and the
    higher priority's jobs run first."""
    ars = three_variants(
        {"maxRunners": 6},
        alpha={"priority": 10},
        beta={"priority": 1},
        gamma={"priority": 1},
    )
    backlog = {"alpha": 14, "beta": 13, "gamma": 13}
    async with CapacityStack(tmp_path, plane, ars, job_duration=1.0, backlog=backlog) as stack:
        done = await finish_times(stack, stack.backlog_jobs, within=300)
        peak = await stack.active_peak()
        assert stack.pods is not None
        print(
            f"assigned peak {peak}, pod peak {stack.pods.peak_pods}, finish medians "
            + ", ".join(f"{v}={statistics.median(t):.1f}s" for v, t in done.items())
        )
        assert peak["peak"] > 6, f"GitHub never held more than the budget: {peak}"
        assert stack.pods.peak_pods <= 6, stack.pods.peak_pods
        assert sum(len(t) for t in done.values()) == 40
        assert statistics.median(done["alpha"]) < statistics.median(done["beta"])
        assert statistics.median(done["alpha"]) < statistics.median(done["gamma"])


async def test_a_cpu_budget_with_mixed_shapes(tmp_path: Path, plane: ControlPlane) -> None:
    shapes = {"alpha": "1", "beta": "2", "gamma": "3"}
    ars = three_variants(
        {"resources": {"cpu": "8"}},
        **{v: {"template": runner_template(cpu)} for v, cpu in shapes.items()},
    )
    async with CapacityStack(tmp_path, plane, ars) as stack:
        jobs = {
            v: await stack.enqueue(v, n, 1.0)
            for v, n in (("alpha", 14), ("beta", 13), ("gamma", 13))
        }
        await finish_times(stack, jobs, within=300)
        peak = await stack.active_peak({v: float(c) for v, c in shapes.items()})
        assert stack.pods is not None
        print(f"cpu of assigned jobs peak {peak}, cpu of pods peak {stack.pods.peak_cpu}")
        assert peak["peak"] <= 8, peak
        assert stack.pods.peak_cpu <= 8


async def test_drain_mid_burst(tmp_path: Path, plane: ControlPlane) -> None:
    ars = three_variants({"maxRunners": 6})
    async with CapacityStack(tmp_path, plane, ars) as stack:
        assert stack.kube is not None
        assert stack.pods is not None
        jobs = {v: await stack.enqueue(v, 10, 3.0) for v in ("alpha", "beta", "gamma")}
        ids = await stack.scale_set_ids()

        async def gamma_running() -> bool:
            listed = (await stack.jobs()).values()
            return any(j["scaleSetId"] == ids["gamma"] and j["state"] == "running" for j in listed)

        await eventually(gamma_running, within=120, interval=0.2, what="a gamma job running")
        # The variant label finds gamma's runners (so "none left" below is not vacuous).
        gamma_runners = await stack.kube.list(
            EPHEMERAL_RUNNER,
            namespace=stack.namespace,
            label_selector={LABEL_RUNNER_VARIANT: "gamma"},
        )
        assert gamma_runners.items
        from arcflow.common.kube import AUTOSCALING_RUNNER_SET

        variants = stack.ars["spec"]["runnerVariants"]
        variants[2]["drain"] = True
        await stack.kube.patch_merge(
            AUTOSCALING_RUNNER_SET,
            stack.name,
            {"spec": {"runnerVariants": variants}},
            namespace=stack.namespace,
        )

        async def gamma_capacity_zero() -> bool:
            snapshot = await stack.snapshot()
            [gamma] = [s for s in snapshot["scaleSets"] if s["id"] == ids["gamma"]]
            return gamma["maxCapacity"] == 0

        await eventually(gamma_capacity_zero, within=120, interval=0.2, what="gamma advertises 0")
        # The cluster's version at the drain: a pod created later has a higher one. (The pod
        # watch's arrival times lag on a loaded machine: a pod created before the drain and
        # seen after it, whose job even finished meanwhile, is not one created after it.)
        listed = await stack.kube.list(POD, namespace=stack.namespace)
        drain_version = int(listed.resource_version)
        held = {
            j["jobId"]
            for j in (await stack.jobs()).values()
            if j["scaleSetId"] == ids["gamma"] and j["state"] in ("assigned", "running")
        }
        running_then = [
            j
            for j in (await stack.jobs()).values()
            if j["jobId"] in held and j["state"] == "running"
        ]
        if running_then:  # never Drained while one of its jobs still runs
            early = (await stack.ars_doc()).get("status") or {}
            assert early.get("drain") != "Drained", early
        # Siblings finish all their jobs; gamma's running jobs finish too.
        await finish_times(stack, {"alpha": jobs["alpha"], "beta": jobs["beta"]}, within=300)
        if held:  # on a loaded machine gamma's running job may have finished before the drain
            await finish_times(stack, {"gamma": sorted(held)}, within=120)
        last_gamma_done = time.monotonic()
        created = stack.pods.created_versions.get("gamma", [])
        created_after = [v for v in created if v > drain_version]
        print(f"gamma pods created after the drain: {len(created_after)}; held jobs {len(held)}")

        async def drained() -> dict[str, Any]:
            status = (await stack.ars_doc()).get("status") or {}
            found = [c for c in status.get("conditions", []) if c["type"] == "Drained"]
            assert found, status
            condition = found[0]
            assert condition["status"] == "True", condition
            assert status.get("drain") == "Drained"
            return condition

        async def gamma_runners_gone() -> bool:
            listed = await stack.kube.list(
                EPHEMERAL_RUNNER,
                namespace=stack.namespace,
                label_selector={LABEL_RUNNER_VARIANT: "gamma"},
            )
            assert not listed.items, [r["metadata"]["name"] for r in listed.items]
            return True

        # The runners' release after their jobs is the reconciler's runner chain, slower on a
        # loaded machine; the drain is judged from the moment gamma has no runner left.
        await eventually(gamma_runners_gone, within=120, interval=0.2, what="gamma's runners gone")
        runners_gone = time.monotonic()
        await eventually(drained, within=30, interval=0.2, what="Drained condition")
        now = time.monotonic()
        print(
            f"Drained {now - last_gamma_done:.1f}s after gamma's last job, "
            f"{now - runners_gone:.1f}s after its last runner went"
        )
        assert now - runners_gone <= 10
        queued = [
            j for j in jobs["gamma"] if (await stack.jobs())[j]["state"] in ("queued", "available")
        ]
        assert queued, "gamma had jobs left in the queue, never taken while drained"
        # Pods created after the drain serve only jobs GitHub had assigned before it: no runner
        # of a finished job is topped up (the listener sends no new patchID for an unchanged
        # count, and a capacity-short request stops at what it asked for: ADR 0110).
        assert len(created_after) <= len(held), (
            f"{len(created_after)} gamma pods created after the drain for {len(held)} held "
            f"jobs (versions {created_after} after {drain_version})"
        )


async def test_a_quantity_past_the_schema_gets_a_condition_and_an_event(
    tmp_path: Path, plane: ControlPlane
) -> None:
    """The CRD checks ``capacity.resources`` itself, but a runner pod template is kept as
    written: a request of ``cpu: lots`` passes the API server and is caught by the
    reconciler's validation (what ``arcflow validate`` says), which touches nothing else."""
    from arcflow.common.kube import AUTOSCALING_RUNNER_SET, EVENT
    from arcflow.common.validation import validate_manifest

    async with CapacityStack(tmp_path, plane, three_variants({"maxRunners": 6})) as stack:
        assert stack.kube is not None
        broken = three_variants({"resources": {"cpu": "8"}})
        broken["metadata"] = {"name": "broken", "namespace": stack.namespace}
        broken["spec"]["githubConfigUrl"] = stack.ars["spec"]["githubConfigUrl"]
        broken["spec"]["githubConfigSecret"] = stack.ars["spec"]["githubConfigSecret"]
        broken["spec"]["runnerVariants"][0]["template"] = {
            "spec": {"containers": [{"name": "runner", "resources": {"requests": {"cpu": "lots"}}}]}
        }
        [problem] = validate_manifest(broken)
        assert problem.path == "spec.runnerVariants[0].template"
        await stack.kube.create(broken)

        async def refused() -> dict[str, Any]:
            doc = await stack.kube.get(AUTOSCALING_RUNNER_SET, "broken", stack.namespace)  # type: ignore[union-attr]
            conditions = (doc.get("status") or {}).get("conditions") or []
            found = [c for c in conditions if c["type"] == "SpecValid"]
            assert found, conditions
            assert found[0]["status"] == "False", found
            return found[0]

        condition = await eventually(refused, within=60, interval=0.2, what="SpecValid=False")
        assert "cannot be counted against spec.capacity.resources" in condition["message"]
        events = await stack.kube.list(EVENT, namespace=stack.namespace)
        warnings = [
            e
            for e in events.items
            if e.get("type") == "Warning"
            and (e.get("involvedObject") or {}).get("name") == "broken"
            and "spec.capacity.resources" in str(e.get("message"))
        ]
        assert warnings, [e.get("message") for e in events.items]
        # Nothing else broke: the good set still serves a job.
        [job] = await stack.enqueue("alpha", 1, 0.5)
        await finish_times(stack, {"alpha": [job]}, within=60)
