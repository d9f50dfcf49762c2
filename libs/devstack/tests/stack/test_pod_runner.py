"""The kubelet stand-in against the real emulator (HTTP) and the Actions simulator."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from arcflow.common import constants
from arcflow.common.kube import POD, KubeClient, KubeSettings, NotFoundError
from arcflow.devstack.actions_sim import ActionsSimulator
from arcflow.devstack.kube_emulator import KubeEmulator
from arcflow.devstack.pod_runner import PodRunner
from arcflow.devstack.pod_spec import PodStartError, env_secret_refs_of, resolve_container_env
from arcflow.devstack.runner_backend import SimulatedRunnerBackend

pytestmark = pytest.mark.integration

NS = "arc-test"


@pytest.fixture
async def emulator_client(tmp_path: Path) -> AsyncIterator[KubeClient]:
    async with KubeEmulator() as emulator:
        kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        client = await KubeClient.from_settings(
            KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000)
        )
        async with client:
            yield client


@pytest.fixture
async def sim() -> AsyncIterator[ActionsSimulator]:
    async with ActionsSimulator(poll_timeout=1.0) as simulator:
        yield simulator


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _runner_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {constants.LABEL_EPHEMERAL_RUNNER: "True"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "runner",
                    "image": "ghcr.io/actions/actions-runner:latest",
                    "env": [
                        {
                            "name": constants.ENV_JIT_CONFIG,
                            "valueFrom": {
                                "secretKeyRef": {
                                    "name": name,
                                    "key": constants.JIT_SECRET_TOKEN_KEY,
                                }
                            },
                        }
                    ],
                }
            ],
        },
    }


def _listener_pod(name: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {constants.LABEL_COMPONENT: constants.COMPONENT_LISTENER},
        },
        "spec": {
            "containers": [{"name": "listener", "image": "x", "env": env or []}],
            "volumes": [
                {
                    "name": constants.LISTENER_CONFIG_VOLUME,
                    "secret": {"secretName": f"{name}-config"},
                }
            ],
        },
    }


NATS_ENV: list[dict[str, Any]] = [
    {"name": "ARCFLOW_NATS_URL", "value": "nats://127.0.0.1:1"},
    {
        "name": "ARCFLOW_NATS_USER",
        "valueFrom": {"secretKeyRef": {"name": "listener-nats", "key": "user"}},
    },
    {
        "name": "ARCFLOW_NATS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "listener-nats", "key": "password"}},
    },
    {
        "name": "ARCFLOW_NATS_TLS_CA",
        "valueFrom": {"secretKeyRef": {"name": "absent-secret", "key": "ca.crt", "optional": True}},
    },
]


async def _wait_phase(client: KubeClient, name: str, phases: set[str], within: float = 15.0):
    deadline = time.monotonic() + within
    while True:
        pod = await client.get(POD, name, NS)
        phase = (pod.get("status") or {}).get("phase")
        if phase in phases:
            return pod
        assert time.monotonic() < deadline, f"pod {name} still {phase}, wanted {phases}"
        await asyncio.sleep(0.05)


async def test_runner_pod_runs_one_job_and_succeeds(
    emulator_client: KubeClient, sim: ActionsSimulator, tmp_path: Path
) -> None:
    scale_set = sim.engine.create_scale_set({"name": "demo", "runnerGroupId": 1})
    _runner, jit = sim.engine.generate_jit_config(scale_set.id, {"name": "demo-runner-1"})
    job_id = sim.enqueue_job(["demo"], duration=0.3)
    await emulator_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "demo-runner-1", "namespace": NS},
            "data": {constants.JIT_SECRET_TOKEN_KEY: _b64(jit)},
        }
    )
    runner = PodRunner(
        emulator_client, tmp_path / "pods", SimulatedRunnerBackend(sim), namespace=NS
    )
    await runner.start()
    try:
        await runner.wait_ready()
        await emulator_client.create(_runner_pod("demo-runner-1"))
        pod = await _wait_phase(emulator_client, "demo-runner-1", {"Succeeded", "Failed"})
    finally:
        await runner.stop()
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0
    assert terminated["reason"] == "Completed"
    assert sim.job(job_id)["state"] == "completed"
    assert sim.job(job_id)["result"] == "succeeded"
    (record,) = runner.records.values()
    assert record.job_id == job_id
    assert record.exit_code == 0


async def test_runner_pod_without_its_secret_fails_with_a_reason(
    emulator_client: KubeClient, sim: ActionsSimulator, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr("arcflow.devstack.pod_runner._SECRET_WAIT_SECONDS", 0.3)
    runner = PodRunner(
        emulator_client, tmp_path / "pods", SimulatedRunnerBackend(sim), namespace=NS
    )
    await runner.start()
    try:
        await runner.wait_ready()
        await emulator_client.create(_runner_pod("lost-runner"))
        pod = await _wait_phase(emulator_client, "lost-runner", {"Succeeded", "Failed"})
    finally:
        await runner.stop()
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed"
    assert terminated["exitCode"] == 1
    assert "not found" in terminated["message"]


async def test_listener_pod_runs_a_process_that_deletion_stops(
    emulator_client: KubeClient, tmp_path: Path
) -> None:
    """The process is a stand-in module (a sleeper that records its env and config), so the
    test checks the kubelet part: config from the Secret, env, Running, and stop on delete."""
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    out = tmp_path / "seen.json"
    (module_dir / "fake_listener.py").write_text(
        "import json, os, pathlib, sys, time\n"
        "cfg = pathlib.Path(os.environ['LISTENER_CONFIG_PATH']).read_text()\n"
        f"pathlib.Path({str(out)!r}).write_text(json.dumps({{'pid': os.getpid(), "
        "'cfg': json.loads(cfg), 'nats': os.environ.get('ARCFLOW_NATS_URL'),\n"
        "'user': os.environ.get('ARCFLOW_NATS_USER'),\n"
        "'password': os.environ.get('ARCFLOW_NATS_PASSWORD'),\n"
        "'node': os.environ.get('NODE_LEVEL'), 'optimize': sys.flags.optimize}))\n"
        "time.sleep(60)\n"
    )
    config = {"configure_url": "http://sim/org", "github_token": "t0ken", "metrics_addr": ":8080"}
    await emulator_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "lst-config", "namespace": NS},
            "data": {constants.LISTENER_CONFIG_KEY: _b64(json.dumps(config))},
        }
    )
    runner = PodRunner(
        emulator_client,
        tmp_path / "pods",
        None,
        namespace=NS,
        listener_env={
            "ARCFLOW_NATS_URL": "nats://node-level:1",
            "NODE_LEVEL": "yes",
            "PYTHONPATH": str(module_dir),
        },
        listener_module="fake_listener",
    )
    await runner.start()
    try:
        await runner.wait_ready()
        await emulator_client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "listener-nats", "namespace": NS},
                "data": {"user": _b64("listener"), "password": _b64("s3cret-pw")},
            }
        )
        await emulator_client.create(_listener_pod("lst", env=NATS_ENV))
        pod = await _wait_phase(emulator_client, "lst", {"Running", "Failed"})
        assert pod["status"]["phase"] == "Running"
        deadline = time.monotonic() + 10
        while not out.exists():
            assert time.monotonic() < deadline, "listener process never started"
            await asyncio.sleep(0.05)
        seen = json.loads(out.read_text())
        # The pod spec's env wins over node-level env; secretKeyRefs are resolved.
        assert seen["nats"] == "nats://127.0.0.1:1"
        assert seen["user"] == "listener"
        assert seen["password"] == "s3cret-pw"
        assert seen["node"] == "yes"
        assert seen["optimize"] == 2  # the listener image's PYTHONOPTIMIZE (LISTENER_IMAGE_ENV)
        assert seen["cfg"]["github_token"] == "t0ken"
        assert seen["cfg"]["metrics_addr"].startswith("127.0.0.1:")
        assert runner.running_processes == [seen["pid"]]
        await emulator_client.delete(POD, "lst", namespace=NS)
        deadline = time.monotonic() + 10
        while runner.running_processes:
            assert time.monotonic() < deadline, "deleting the pod did not stop its process"
            await asyncio.sleep(0.05)
        with pytest.raises(ProcessLookupError):
            os.kill(seen["pid"], 0)
        with pytest.raises(NotFoundError):
            await emulator_client.get(POD, "lst", NS)
    finally:
        await runner.stop()


async def test_listener_pod_with_a_missing_env_secret_fails_with_a_reason(
    emulator_client: KubeClient, tmp_path: Path
) -> None:
    """A required secretKeyRef whose key is missing stops the start (a kubelet's
    CreateContainerConfigError); the reason names the env var and key, never a value."""
    await emulator_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "lst2-config", "namespace": NS},
            "data": {constants.LISTENER_CONFIG_KEY: _b64(json.dumps({"configure_url": "x"}))},
        }
    )
    await emulator_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "listener-nats", "namespace": NS},
            "data": {"user": _b64("listener")},
        }
    )
    runner = PodRunner(emulator_client, tmp_path / "pods", None, namespace=NS)
    await runner.start()
    try:
        await runner.wait_ready()
        await emulator_client.create(_listener_pod("lst2", env=NATS_ENV))
        pod = await _wait_phase(emulator_client, "lst2", {"Running", "Failed"})
    finally:
        await runner.stop()
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed"
    assert terminated["message"] == "env ARCFLOW_NATS_PASSWORD: secret has no key password"
    assert runner.running_processes == []


def test_resolve_container_env_orders_and_overrides_like_a_kubelet() -> None:
    pod = _listener_pod(
        "p",
        env=[
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "b"}}},
            {"name": "A", "value": "2"},
            {
                "name": "C",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "c", "optional": True}},
            },
            {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    )
    secrets = {"s": {"data": {"b": _b64("bee")}}}
    assert resolve_container_env(pod, "listener", secrets) == {"A": "2", "B": "bee"}
    assert env_secret_refs_of(pod, "listener") == {"s": False}
    with pytest.raises(PodStartError, match="env B: secret s not found"):
        resolve_container_env(pod, "listener", {})


async def test_runner_pod_status_reaches_an_api_server_that_refused_it_for_a_while(
    sim: ActionsSimulator, tmp_path: Path
) -> None:
    """A kubelet retries status writes: a pod whose end was refused (5xx, or the API server
    restarting) must still end Succeeded, or its runner would never be finished."""
    async with KubeEmulator() as emulator:
        kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        client = await KubeClient.from_settings(
            KubeSettings(kubeconfig=str(kubeconfig), qps=1000, burst=1000)
        )
        async with client:
            scale_set = sim.engine.create_scale_set({"name": "demo", "runnerGroupId": 1})
            _runner, jit = sim.engine.generate_jit_config(scale_set.id, {"name": "demo-runner-2"})
            job_id = sim.enqueue_job(["demo"], duration=0.3)
            await client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "demo-runner-2", "namespace": NS},
                    "data": {constants.JIT_SECRET_TOKEN_KEY: _b64(jit)},
                }
            )
            refused = emulator.inject_error(
                verb="patch",
                resource="pods/status",
                status=500,
                reason="InternalError",
                message="status writes refused for a while",
                times=4,
            )
            runner = PodRunner(client, tmp_path / "pods", SimulatedRunnerBackend(sim), namespace=NS)
            await runner.start()
            try:
                await runner.wait_ready()
                await client.create(_runner_pod("demo-runner-2"))
                pod = await _wait_phase(client, "demo-runner-2", {"Succeeded", "Failed"})
            finally:
                await runner.stop()
    assert refused.hits == 4
    assert pod["status"]["phase"] == "Succeeded"
    assert sim.job(job_id)["state"] == "completed"


async def test_on_the_emulator_no_node_is_registered_and_listeners_keep_the_node_kubeconfig(
    emulator_client: KubeClient, sim: ActionsSimulator, tmp_path: Path
) -> None:
    """Given the node kubeconfig, the runner asks the server what it serves: the emulator
    serves no Nodes, bindings or TokenRequests, so pods are played unbound, as before."""
    kubeconfig = str(tmp_path / "kubeconfig")  # written by the emulator_client fixture
    scale_set = sim.engine.create_scale_set({"name": "demo", "runnerGroupId": 1})
    _runner, jit = sim.engine.generate_jit_config(scale_set.id, {"name": "demo-runner-3"})
    sim.enqueue_job(["demo"], duration=0.3)
    await emulator_client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "demo-runner-3", "namespace": NS},
            "data": {constants.JIT_SECRET_TOKEN_KEY: _b64(jit)},
        }
    )
    runner = PodRunner(
        emulator_client,
        tmp_path / "pods",
        SimulatedRunnerBackend(sim),
        namespace=NS,
        kubeconfig=kubeconfig,
    )
    await runner.start()
    try:
        await runner.wait_ready()
        assert runner.node is None
        assert not runner.capabilities.token_request
        await emulator_client.create(_runner_pod("demo-runner-3"))
        pod = await _wait_phase(emulator_client, "demo-runner-3", {"Succeeded", "Failed"})
    finally:
        await runner.stop()
    assert pod["status"]["phase"] == "Succeeded"
    assert "nodeName" not in pod["spec"]
    assert pod["status"]["podIP"] == "127.0.0.1"
