"""The pod runner as a kubelet on the real kube-apiserver of the test session: a Node with a
Lease heartbeat, pods bound to it with a kubelet's status, and listeners with their pod's
ServiceAccount identity (never the admin's)."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common import constants
from arcflow.common.kube import POD, ForbiddenError, KubeApiError, KubeClient, NotFoundError
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.kubelet import NODE_LEASE_NAMESPACE, ApiCaller
from arcflow.devstack.pod_runner import PodRunner
from arcflow.devstack.runner_backend import SimulatedRunnerBackend
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def _real_server_only(on_real_server: bool) -> None:
    if not on_real_server:
        pytest.skip("needs a real kube-apiserver (the emulator serves no Nodes or tokens)")


@pytest.fixture
def node_name() -> str:
    return f"arcflow-test-node-{secrets.token_hex(3)}"


@pytest.fixture
def kubeconfig(kube_kubeconfig: str) -> str:
    """The admin kubeconfig of the session's real server."""
    return kube_kubeconfig


@pytest.fixture
async def admin_api(kubeconfig: str) -> AsyncIterator[ApiCaller]:
    api = ApiCaller.from_kubeconfig(kubeconfig)
    yield api
    await api.close()


@pytest.fixture
async def sim() -> AsyncIterator[ActionsSimulator]:
    async with ActionsSimulator(poll_timeout=1.0) as simulator:
        yield simulator


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _default_account(client: KubeClient, namespace: str) -> None:
    """Pods naming the ``default`` ServiceAccount are refused until its controller made it."""

    async def exists() -> bool:
        try:
            await client.get("ServiceAccount", "default", namespace)
        except NotFoundError:
            return False
        return True

    await eventually(exists, within=30, what=f"ServiceAccount {namespace}/default")


def _runner_pod(name: str, namespace: str) -> dict[str, Any]:
    env = {
        "name": constants.ENV_JIT_CONFIG,
        "valueFrom": {"secretKeyRef": {"name": name, "key": constants.JIT_SECRET_TOKEN_KEY}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {constants.LABEL_EPHEMERAL_RUNNER: "True"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "runner", "image": "runner:test", "env": [env]}],
        },
    }


async def _phases_of(
    client: KubeClient, namespace: str, name: str, seen: list[dict[str, Any]]
) -> None:
    """Every version of the pod the watch delivers, in order (until cancelled)."""
    stream = client.watch(POD, namespace=namespace, field_selector=f"metadata.name={name}")
    async with stream:
        async for event in stream:
            if event.type in ("ADDED", "MODIFIED"):
                seen.append(event.object)


async def test_runner_pod_is_bound_and_reports_a_kubelets_status(
    kube_client: KubeClient,
    kube_namespace: str,
    kubeconfig: str,
    sim: ActionsSimulator,
    admin_api: ApiCaller,
    node_name: str,
    tmp_path: Path,
) -> None:
    ns = kube_namespace
    await _default_account(kube_client, ns)
    scale_set = sim.engine.create_scale_set({"name": "demo", "runnerGroupId": 1})
    _runner, jit = sim.engine.generate_jit_config(scale_set.id, {"name": "runner-1"})
    job_id = sim.enqueue_job(["demo"], duration=1.0)
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "runner-1", "namespace": ns},
            "data": {constants.JIT_SECRET_TOKEN_KEY: _b64(jit)},
        }
    )
    seen: list[dict[str, Any]] = []
    watcher = asyncio.create_task(_phases_of(kube_client, ns, "runner-1", seen))
    runner = PodRunner(
        kube_client,
        tmp_path / "pods",
        SimulatedRunnerBackend(sim),
        namespace=ns,
        kubeconfig=kubeconfig,
        node_name=node_name,
    )
    await runner.start()
    try:
        await runner.wait_ready()
        await kube_client.create(_runner_pod("runner-1", ns))

        async def finished() -> dict[str, Any]:
            pod = await kube_client.get(POD, "runner-1", ns)
            phase = (pod.get("status") or {}).get("phase")
            assert phase in ("Succeeded", "Failed"), f"phase {phase}"
            return pod

        pod = await eventually(finished, within=60, what="runner pod terminal")

        async def watched_terminal() -> bool:
            # The watch's event can come after the read above saw the phase: wait for it
            # before the watch is stopped.
            phases = [p.get("status", {}).get("phase") for p in seen] or [None]
            assert phases[-1] in ("Succeeded", "Failed"), f"the watch saw {phases}"
            return True

        await eventually(watched_terminal, within=30, what="the pod's watch sees it terminal")
    finally:
        await runner.stop()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await admin_api.request("DELETE", f"/api/v1/nodes/{node_name}")

    phases = [p.get("status", {}).get("phase") for p in seen]
    assert None not in phases, phases  # the server always has a phase (Pending at create)
    ordered = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert ordered[-3:] == ["Pending", "Running", "Succeeded"], phases
    assert pod["spec"]["nodeName"] == node_name
    status = pod["status"]
    assert status["hostIP"] == status["podIP"] == "127.0.0.1"
    assert status["startTime"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["PodScheduled"] == "True"
    assert conditions["Initialized"] == "True"
    assert conditions["Ready"] == conditions["ContainersReady"] == "False"
    (container,) = status["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 0
    assert container["state"]["terminated"]["reason"] == "Completed"
    running = next(p for p in seen if p.get("status", {}).get("phase") == "Running")
    assert running["spec"]["nodeName"] == node_name
    assert {c["type"]: c["status"] for c in running["status"]["conditions"]}["Ready"] == "True"
    assert "running" in running["status"]["containerStatuses"][0]["state"]
    assert sim.job(job_id)["result"] == "succeeded"


async def test_node_is_ready_and_its_lease_is_renewed(
    kube_client: KubeClient, kubeconfig: str, admin_api: ApiCaller, node_name: str, tmp_path: Path
) -> None:
    runner = PodRunner(
        kube_client,
        tmp_path / "pods",
        None,
        namespace="arcflow-no-pods-here",
        kubeconfig=kubeconfig,
        node_name=node_name,
        lease_interval=0.5,
    )
    await runner.start()
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"
    try:
        node = await admin_api.request("GET", f"/api/v1/nodes/{node_name}")
        assert node["metadata"]["labels"]["kubernetes.io/os"] == "linux"
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert ready["Ready"] == "True"
        assert node["status"]["allocatable"]["pods"]
        first = await admin_api.request("GET", f"{lease_path}/{node_name}")
        assert first["spec"]["holderIdentity"] == node_name
        assert first["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]

        async def renewed() -> bool:
            lease = await admin_api.request("GET", f"{lease_path}/{node_name}")
            assert lease["spec"]["renewTime"] > first["spec"]["renewTime"], lease["spec"]
            return True

        await eventually(renewed, within=20, what="a newer Lease renewTime")
    finally:
        await runner.stop()
        await admin_api.request("DELETE", f"/api/v1/nodes/{node_name}")


FAKE_LISTENER = """\
import json, os, pathlib, time
pathlib.Path(os.environ["OUT"]).write_text(json.dumps({
    "kubeconfig": os.environ.get("ARCFLOW_KUBE_KUBECONFIG"), "pid": os.getpid()}))
time.sleep(120)
"""


async def test_listener_runs_with_its_pods_service_account_not_the_admin(
    kube_client: KubeClient,
    kube_namespace: str,
    kubeconfig: str,
    control_plane: ControlPlane,
    admin_api: ApiCaller,
    node_name: str,
    tmp_path: Path,
) -> None:
    ns = kube_namespace
    await _default_account(kube_client, ns)
    modules = tmp_path / "mods"
    modules.mkdir()
    (modules / "fake_listener.py").write_text(FAKE_LISTENER)
    out = tmp_path / "seen.json"
    await kube_client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "lst", "namespace": ns}}
    )
    config = {"configure_url": "http://sim/org", "github_token": "t0ken", "metrics_addr": ":8080"}
    await kube_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "lst-config", "namespace": ns},
            "data": {constants.LISTENER_CONFIG_KEY: _b64(json.dumps(config))},
        }
    )
    runner = PodRunner(
        kube_client,
        tmp_path / "pods",
        None,
        namespace=ns,
        listener_env={
            "ARCFLOW_KUBE_KUBECONFIG": kubeconfig,  # the node level: the pod's identity wins
            "PYTHONPATH": str(modules),
            "OUT": str(out),
        },
        listener_module="fake_listener",
        kubeconfig=kubeconfig,
        node_name=node_name,
        token_renew_every=1.0,
    )
    await runner.start()
    try:
        await runner.wait_ready()
        await kube_client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "lst",
                    "namespace": ns,
                    "labels": {constants.LABEL_COMPONENT: constants.COMPONENT_LISTENER},
                },
                "spec": {
                    "serviceAccountName": "lst",
                    "containers": [{"name": "listener", "image": "listener:test"}],
                    "volumes": [
                        {
                            "name": constants.LISTENER_CONFIG_VOLUME,
                            "secret": {"secretName": "lst-config"},
                        }
                    ],
                },
            }
        )

        async def started() -> dict[str, Any]:
            assert out.exists(), "the listener process has not started"
            text = out.read_text()
            try:  # the process may have created the file and not yet written it
                return dict(json.loads(text))
            except json.JSONDecodeError as exc:
                raise AssertionError(
                    f"the listener's output is not complete yet: {text!r}"
                ) from exc

        seen = await eventually(started, within=30, what="listener process start")
        pod_kubeconfig = Path(seen["kubeconfig"])
        assert pod_kubeconfig != Path(kubeconfig)
        assert pod_kubeconfig.stat().st_mode & 0o077 == 0
        document = yaml.safe_load(pod_kubeconfig.read_text())
        (user,) = document["users"]
        assert set(user["user"]) == {"tokenFile"}  # no client certificate, no admin anything
        assert Path(user["user"]["tokenFile"]).stat().st_mode & 0o077 == 0
        assert document["clusters"][0]["cluster"]["server"] == control_plane.url

        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        review_path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
        as_pod = ApiCaller.from_kubeconfig(pod_kubeconfig)
        try:
            answer = await as_pod.request("POST", review_path, review)
            assert answer["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:lst"
            with pytest.raises(ForbiddenError):
                await as_pod.request("GET", f"/api/v1/namespaces/{ns}/secrets")
            token = Path(user["user"]["tokenFile"]).read_text()

            async def renewed() -> bool:
                assert Path(user["user"]["tokenFile"]).read_text() != token, "same token"
                return True

            await eventually(renewed, within=20, what="a renewed token in the token file")
            fresh = ApiCaller.from_kubeconfig(pod_kubeconfig)
            try:
                again = await fresh.request("POST", review_path, review)
                assert again["status"]["userInfo"]["username"].endswith(f":{ns}:lst")
            finally:
                await fresh.close()
        finally:
            await as_pod.close()

        # Deleting the pod stops the process, the pod goes away (the final delete a kubelet
        # sends) and its bound token stops working.
        await kube_client.delete(POD, "lst", namespace=ns)

        async def gone() -> bool:
            try:
                await kube_client.get(POD, "lst", ns)
            except NotFoundError:
                return True
            return False

        await eventually(gone, within=30, what="listener pod deleted")
        assert runner.running_processes == []
        after = ApiCaller.from_kubeconfig(pod_kubeconfig)
        try:

            async def refused() -> bool:
                status = 200
                try:
                    await after.request("POST", review_path, review)
                except KubeApiError as exc:
                    status = exc.status
                assert status == 401, f"the token of a deleted pod got {status}"
                return True

            await eventually(refused, within=20, what="the bound token rejected")
        finally:
            await after.close()
    finally:
        await runner.stop()
        await admin_api.request("DELETE", f"/api/v1/nodes/{node_name}")
