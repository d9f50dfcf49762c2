"""``helm install`` as a user would, on a real node, and jobs end to end on real runner pods
(docs/node.md, "helm install on the node"; issue #30 items 3-5).

One node for the module (tests/fixtures/helm_node.py): NATS as a pod, the umbrella chart, the
Actions simulator on the node's address, the runner-set chart with the three variants of
examples/02-runner-variants.yaml and the runner image of ADR 0091. The tests run in order: the
install, jobs on runner pods, ``arcflow audit``/``doctor``, three faults with jobs flowing (a
killed listener container, a service pod deleted mid-burst, a kubelet restart: in the suite
again since the bytecode of ADR 0111 gave it room, ADR 0109's amendment), ``helm upgrade`` to a
changed chart, and last the uninstall that must leave nothing of arcflow behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.constants import LABEL_EPHEMERAL_RUNNER
from arcflow.devstack.identities import UMBRELLA_CHART
from arcflow.devstack.node import Node
from arcflow.devstack.node import nats as node_nats
from arcflow.devstack.node.release import (
    NAMESPACE,
    NATS_URL,
    RELEASE,
    SERVICES,
    pods,
    ready,
    user_values,
)
from tests.fixtures.helm_node import (
    CHARTS,
    RUNNERS,
    VARIANTS,
    all_ready,
    arcflow_cli,
    auditor_env,
    diagnosis,
    enqueue_everywhere,
    get,
    helm,
    jobs_done,
    monitor,
    port_forward,
    scale_set_name,
    sim,
)
from tests.polling import eventually

pytestmark = pytest.mark.scenario

#: Jobs on a loaded 2-core node: a runner pod starts in seconds, more under load.
JOBS_WITHIN = 300


async def test_nats_runs_as_a_pod_with_jetstream_and_the_arcflow_users(
    helm_node: Node, helm_release: str
) -> None:
    found = await all_ready(helm_node, ("nats",), within=90)
    config = get(helm_node, f"/api/v1/namespaces/{NAMESPACE}/configmaps/nats-config")
    assert "jetstream" in config["data"]["nats.conf"]
    varz = monitor(helm_node, "varz")
    assert varz["jetstream"]["config"]["store_dir"].startswith("/data"), varz["jetstream"]
    # The chart's authorization block is in force: one user per arcflow service.
    assert varz.get("auth_required") is True, diagnosis(helm_node)
    assert found["nats"]["spec"]["nodeName"] == helm_node.name


async def test_the_services_run_ready_from_their_images_under_their_service_accounts(
    helm_node: Node, helm_release: str, helm_images: dict[str, str]
) -> None:
    # Ready means: NATS connected (at the Service's DNS name) and every component ready.
    found = await all_ready(helm_node, SERVICES, within=180)
    for name in SERVICES:
        pod = found[name]
        account = f"{RELEASE}-{name}"
        assert pod["spec"]["serviceAccountName"] == account
        get(helm_node, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}")
        container = pod["spec"]["containers"][0]
        assert container["image"] == helm_images[name]
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["ARCFLOW_NATS_URL"]["value"] == NATS_URL
        assert "KUBECONFIG" not in env  # in-cluster: the ServiceAccount's token and CA
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts


async def test_the_services_declared_their_streams_in_nats(
    helm_node: Node, helm_release: str
) -> None:
    await all_ready(helm_node, (*SERVICES, "nats"), within=180)
    jsz = monitor(helm_node, "jsz?accounts=true&streams=true")
    streams = {
        stream["name"]
        for account in jsz.get("account_details", [])
        for stream in account.get("stream_detail", [])
    }
    assert {"ARC_K8S", "ARC_JOBS", "ARC_SCALESETS"} <= streams, (streams, diagnosis(helm_node))


def _listener_pods(node: Node, images: dict[str, str]) -> list[dict[str, Any]]:
    return [
        pod for pod in pods(node)
        if pod["spec"]["containers"][0]["image"] == images["listener"]
        and not pod["metadata"].get("deletionTimestamp")
    ]  # fmt: skip


async def _sessions_open(node: Node, images: dict[str, str], sim_url: str) -> dict[str, Any]:
    """The one listener pod Ready with a live session per variant; returns the pod."""

    async def listening() -> dict[str, Any]:
        listeners = _listener_pods(node, images)
        assert len(listeners) == 1, f"listener pods: {[p['metadata']['name'] for p in listeners]}"
        assert ready(listeners[0]), "the listener pod is not Ready"
        scale_sets = sim(f"{sim_url}/_sim/snapshot").get("scaleSets") or []
        open_ = sorted(s["name"] for s in scale_sets if s.get("session"))
        assert open_ == sorted(map(scale_set_name, VARIANTS)), f"sessions open: {open_}"
        return listeners[0]

    try:
        return dict(await eventually(listening, within=180, interval=1, what="sessions open"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(node)}") from None


async def test_the_listener_pod_runs_the_listener_image_and_opens_its_sessions(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    await all_ready(helm_node, SERVICES, within=180)
    listener = await _sessions_open(helm_node, helm_images, helm_simulator)
    assert listener["spec"]["nodeName"] == helm_node.name
    assert listener["metadata"]["namespace"] == NAMESPACE


async def test_the_three_variant_example_completes_its_jobs_on_runner_pods(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    await _sessions_open(helm_node, helm_images, helm_simulator)
    seen: dict[str, dict[str, Any]] = {}
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2)

    async def done_watching_runner_pods() -> bool:  # the runner pods, while they exist
        for pod in pods(helm_node, RUNNERS):
            if LABEL_EPHEMERAL_RUNNER in pod["metadata"].get("labels", {}):
                seen[pod["metadata"]["name"]] = pod
        jobs = sim(f"{helm_simulator}/_sim/jobs")["jobs"]
        done = [j for j in jobs if j["jobId"] in job_ids and j["state"] == "completed"]
        assert len(done) == len(job_ids), f"{len(done)} of {len(job_ids)} jobs completed"
        return True

    try:
        await eventually(done_watching_runner_pods, within=JOBS_WITHIN, interval=0.5, what="jobs")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(helm_node)}") from None
    jobs = await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)
    by_variant = dict.fromkeys(VARIANTS, 0)
    for job in jobs:
        variant = next(v for v in VARIANTS if job["labels"] == [scale_set_name(v)])
        # The runner is named after its EphemeralRunner: "<ARS>-<variant>-runner-<id>".
        assert job["runnerName"].startswith(f"{RUNNERS}-{variant}-"), job
        by_variant[variant] += 1
    assert by_variant == dict.fromkeys(VARIANTS, 2)
    for variant in VARIANTS:
        assert any(name.startswith(f"{RUNNERS}-{variant}-") for name in seen), (variant, seen)
    for pod in seen.values():
        container = pod["spec"]["containers"][0]
        assert container["image"] == helm_images["runner"]
        assert pod["spec"].get("nodeName") in (None, helm_node.name)  # None: not bound yet
        context = container["securityContext"]
        assert (context["runAsUser"], context["readOnlyRootFilesystem"]) == (10001, True)
        for status in pod.get("status", {}).get("containerStatuses", []):
            ended = (status.get("state") or {}).get("terminated")
            assert ended is None or ended["exitCode"] == 0, (pod["metadata"]["name"], ended)


async def test_arcflow_audit_and_doctor_read_the_node(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    """A user's tools: NATS through ``kubectl port-forward`` with the auditor's identity from
    its Secret, and the admin's kubeconfig."""
    await _sessions_open(helm_node, helm_images, helm_simulator)
    job_ids = set(enqueue_everywhere(helm_simulator, per_variant=1))
    await jobs_done(helm_node, helm_simulator, sorted(job_ids), within=JOBS_WITHIN)
    env = auditor_env(helm_node)
    with port_forward(helm_node, "svc/nats", node_nats.CLIENT_PORT) as port:
        url = f"nats://127.0.0.1:{port}"
        audit = arcflow_cli("audit", "--nats-url", url, "--type", "jobs.batch",
                            "--no-follow", "-o", "jsonl", env=env)  # fmt: skip
        assert audit.returncode == 0, audit.stderr[-3000:]
        completed = {
            job["job_id"]
            for line in audit.stdout.splitlines()
            for job in json.loads(line).get("jobs", [])
            if job["message_type"] == "JobCompleted"
        }
        assert job_ids <= completed, (sorted(job_ids - completed), audit.stderr[-2000:])
        kubeconfig = str(helm_node.control_plane.kubeconfig)
        doctor = arcflow_cli("doctor", "--kubeconfig", kubeconfig, "--nats-url", url,
                             "-o", "json", env=env)  # fmt: skip
    assert doctor.returncode == 0, f"{doctor.stdout[-3000:]}\n{doctor.stderr[-2000:]}"
    report = json.loads(doctor.stdout)
    sets = {(s["namespace"], s["name"]): s for s in report["sets"]}
    assert sets[(RUNNERS, RUNNERS)]["healthy"] is True, report
    assert sorted(sets[(RUNNERS, RUNNERS)]["variants"]) == sorted(VARIANTS), report
    for secret in (env["ARCFLOW_NATS_PASSWORD"],):
        assert secret not in audit.stdout + audit.stderr + doctor.stdout + doctor.stderr


# --- faults only a real node gives (issue #30 item 5), jobs flowing: 0 lost, 0 run twice ------


async def _running(sim_url: str, job_ids: list[str]) -> bool:
    async def some() -> bool:
        jobs = sim(f"{sim_url}/_sim/jobs")["jobs"]
        assert any(j["jobId"] in job_ids and j["state"] == "running" for j in jobs), "none running"
        return True

    return bool(await eventually(some, within=JOBS_WITHIN, interval=0.5, what="a job running"))


def _container_pid(node: Node, pod: dict[str, Any]) -> int:
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
    return int(json.loads(node.crictl("inspect", container_id))["info"]["pid"])


async def test_a_killed_listener_container_is_replaced_and_jobs_flow(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    """SIGKILL to the listener's process. The listener pod's restartPolicy is Never (as
    upstream's), so the kubelet marks the pod failed and the reconciler starts a new one, which
    opens the sessions again; the jobs queued meanwhile run."""
    before = await _sessions_open(helm_node, helm_images, helm_simulator)
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=3.0)
    await _running(helm_simulator, job_ids)
    os.kill(_container_pid(helm_node, before), signal.SIGKILL)
    job_ids += enqueue_everywhere(helm_simulator, per_variant=1)

    async def noticed() -> bool:  # the old pod's container seen ended (or the pod gone)
        uid = before["metadata"]["uid"]
        old = [p for p in pods(helm_node) if p["metadata"]["uid"] == uid]
        statuses = old[0].get("status", {}).get("containerStatuses", []) if old else []
        assert not old or any(
            "terminated" in (s.get("state") or {}) or s.get("restartCount", 0) > 0 for s in statuses
        ), "the killed listener is still seen running"
        return True

    await eventually(noticed, within=120, interval=0.5, what="the listener's end noticed")
    after = await _sessions_open(helm_node, helm_images, helm_simulator)
    replaced = after["metadata"]["uid"] != before["metadata"]["uid"]
    restarted = after["status"]["containerStatuses"][0].get("restartCount", 0) > 0
    assert replaced or restarted, "the listener came back neither as a new pod nor restarted"
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)


async def test_a_service_pod_deleted_mid_burst_comes_back_and_jobs_flow(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    """The reconciler's pod (the writer of every runner) deleted while jobs run: its
    Deployment starts another, which converges from the cluster's state."""
    await _sessions_open(helm_node, helm_images, helm_simulator)
    old = (await all_ready(helm_node, ("reconciler",), within=120))["reconciler"]
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=2.0)
    await _running(helm_simulator, job_ids)
    name = old["metadata"]["name"]
    helm_node.control_plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    job_ids += enqueue_everywhere(helm_simulator, per_variant=1)
    new = (await all_ready(helm_node, ("reconciler",), within=180))["reconciler"]
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)


async def test_a_kubelet_restart_keeps_jobs_flowing(
    helm_node: Node, helm_images: dict[str, str], helm_simulator: str, helm_runner_set: str
) -> None:
    """The kubelet stopped and started again mid-burst: containers keep running under their
    shims, the kubelet takes them up again and starts the pods created meanwhile."""
    await _sessions_open(helm_node, helm_images, helm_simulator)
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=2.0)
    await _running(helm_simulator, job_ids)
    helm_node.restart("kubelet")
    job_ids += enqueue_everywhere(helm_simulator, per_variant=1)
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)
    await all_ready(helm_node, (*SERVICES, "nats"), within=120)


# --- upgrade and uninstall ------------------------------------------------------------------


def _changed_umbrella(folder: Path) -> Path:
    """A copy of the umbrella chart (sub-charts resolved) with a new version and a pod
    annotation added to every service's default values: an upgrade rolls all three."""
    chart = folder / "arcflow"
    shutil.copytree(CHARTS.parents[1] / UMBRELLA_CHART, chart, symlinks=False)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = f"{meta['version']}-upgraded"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    for name in SERVICES:
        values.setdefault(name, {})["podAnnotations"] = {"arcflow.dev/upgraded": "yes"}
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    return chart


async def test_helm_upgrade_to_a_changed_chart_keeps_jobs_flowing(
    helm_node: Node,
    helm_images: dict[str, str],
    helm_simulator: str,
    helm_runner_set: str,
    tmp_path: Path,
) -> None:
    await _sessions_open(helm_node, helm_images, helm_simulator)
    job_ids = enqueue_everywhere(helm_simulator, per_variant=2, duration=2.0)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(user_values(helm_images)))
    helm(helm_node, "upgrade", RELEASE, str(_changed_umbrella(tmp_path)), "-n", NAMESPACE,
         "-f", str(values), "--wait", "--timeout", "4m")  # fmt: skip
    job_ids += enqueue_everywhere(helm_simulator, per_variant=1)
    found = await all_ready(helm_node, SERVICES, within=180)
    for name in SERVICES:
        annotations = found[name]["metadata"].get("annotations", {})
        assert annotations.get("arcflow.dev/upgraded") == "yes", (name, annotations)
    await jobs_done(helm_node, helm_simulator, job_ids, within=JOBS_WITHIN)


ARCFLOW_KINDS = (
    "autoscalingrunnersets",
    "ephemeralrunnersets",
    "ephemeralrunners",
    "autoscalinglisteners",
)


def _left_behind(node: Node, sim_url: str) -> list[str]:
    """Whatever of arcflow is still there besides NATS (not part of either release)."""
    left = []
    for namespace in (NAMESPACE, RUNNERS):
        for pod in pods(node, namespace):
            if pod["metadata"].get("labels", {}).get("app.kubernetes.io/name") != "nats":
                left.append(f"pod {namespace}/{pod['metadata']['name']}")
        for kind in ARCFLOW_KINDS:
            path = f"/apis/actions.github.com/v1alpha1/namespaces/{namespace}/{kind}"
            left += [f"{kind} {o['metadata']['name']}" for o in get(node, path)["items"]]
        for kind in ("secrets", "serviceaccounts", "configmaps"):
            for item in get(node, f"/api/v1/namespaces/{namespace}/{kind}")["items"]:
                name = item["metadata"]["name"]
                if name in ("default", "kube-root-ca.crt", "nats-config"):
                    continue
                left.append(f"{kind} {namespace}/{name}")
        for kind in ("roles", "rolebindings"):
            path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{kind}"
            left += [
                f"{kind} {namespace}/{o['metadata']['name']}" for o in get(node, path)["items"]
            ]
    deployments = get(node, f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")["items"]
    left += [
        f"deployment {d['metadata']['name']}"
        for d in deployments
        if d["metadata"]["name"] != "nats"
    ]
    snapshot = sim(f"{sim_url}/_sim/snapshot")
    left += [f"scale set {s['name']} on GitHub" for s in snapshot.get("scaleSets", [])]
    left += [f"runner {r['name']} on GitHub" for r in snapshot.get("runners", [])]
    return left


async def test_helm_uninstall_and_deleting_the_set_leave_nothing_behind(
    helm_node: Node, helm_release: str, helm_simulator: str, helm_runner_set: str
) -> None:
    await all_ready(helm_node, SERVICES, within=180)
    # The runner set first (it deletes the AutoscalingRunnerSet): its finalizers need the
    # reconciler, and the registrar deletes its scale sets on GitHub.
    helm(helm_node, "uninstall", helm_runner_set, "-n", RUNNERS, "--wait", "--timeout", "3m")

    async def set_gone() -> bool:
        path = f"/apis/actions.github.com/v1alpha1/namespaces/{RUNNERS}/autoscalingrunnersets"
        assert not get(helm_node, path)["items"], "the AutoscalingRunnerSet is still there"
        scale_sets = sim(f"{helm_simulator}/_sim/snapshot").get("scaleSets", [])
        assert not scale_sets, f"scale sets on GitHub: {[s['name'] for s in scale_sets]}"
        return True

    try:
        await eventually(set_gone, within=120, interval=0.5, what="the set and its scale sets gone")
    except AssertionError as exc:  # the registrar deletes the scale sets: its log says why not
        raise AssertionError(f"{exc}\n{diagnosis(helm_node, (NAMESPACE,))}") from None
    helm(helm_node, "uninstall", helm_release, "-n", NAMESPACE, "--wait", "--timeout", "2m")

    async def gone() -> bool:
        left = _left_behind(helm_node, helm_simulator)
        assert not left, f"left behind: {left}"
        return True

    try:
        await eventually(gone, within=120, interval=0.5, what="nothing of arcflow left")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(helm_node)}") from None
