"""A real node (docs/node.md): the real scheduler binds, the kubelet runs containers with
containerd and runc in real cgroups, pods resolve Services through CoreDNS and reach the API
server through kube-proxy, and the teardown leaves nothing behind.

One node for the module (``kube_node``); the last test tears it down itself and looks.
"""

from __future__ import annotations

import os
import secrets
import urllib.error
from typing import Any

import pytest

from arcflow.devstack.control_plane import SERVICE_CIDR
from arcflow.devstack.node import Node
from arcflow.devstack.node.teardown import cgroup_pids
from tests.polling import eventually

pytestmark = pytest.mark.scenario

UID = 10001


def _image(node: Node, name: str) -> str:
    return next(image for image in node.images if f"/{name}:" in image or f"{name}:" in image)


def _get(node: Node, path: str) -> dict[str, Any]:
    return node.control_plane.request("GET", path)


@pytest.fixture(scope="module")
def namespace(kube_node: Node) -> str:
    name = f"node-{secrets.token_hex(3)}"
    kube_node.control_plane.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    return name


async def _default_account(node: Node, namespace: str) -> None:
    async def exists() -> bool:
        try:
            return bool(_get(node, f"/api/v1/namespaces/{namespace}/serviceaccounts/default"))
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"no default ServiceAccount yet: {exc.code}") from None

    await eventually(exists, within=30, interval=0.2, what="the default ServiceAccount")


async def _run_pod(
    node: Node, namespace: str, script: str, *, memory: str = "64Mi", within: float = 60
) -> dict[str, Any]:
    """Create a pod running ``python -c script`` in the listener image; wait for its end."""
    await _default_account(node, namespace)
    name = f"probe-{secrets.token_hex(3)}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True},
            "containers": [{
                "name": "probe",
                "image": _image(node, "listener"),
                "imagePullPolicy": "Never",
                "command": ["python", "-c", script],
                "securityContext": {"readOnlyRootFilesystem": True,
                                    "allowPrivilegeEscalation": False},
                "resources": {"limits": {"memory": memory, "cpu": "500m"}},
            }],
        },
    }  # fmt: skip
    node.control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    async def ended() -> dict[str, Any]:
        current = _get(node, path)
        phase = current.get("status", {}).get("phase")
        assert phase in ("Succeeded", "Failed"), f"phase {phase}: {current.get('status')}"
        return current

    try:
        return dict(await eventually(ended, within=within, interval=0.3, what=f"pod {name} ends"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nkubelet log:\n{_tail(node, 'kubelet')}") from None


def _tail(node: Node, part: str, lines: int = 30) -> str:
    text = node.log_of(part).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _logs(node: Node, pod: dict[str, Any]) -> str:
    """What the API's pods/log answers (``kubectl logs``: the API server asks the kubelet)."""
    meta = pod["metadata"]
    return node.control_plane.get_text(
        f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log", timeout=10
    )


def test_the_node_registers_and_is_ready(kube_node: Node) -> None:
    node = _get(kube_node, f"/api/v1/nodes/{kube_node.name}")
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == kube_node.control_plane.version
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True", ready
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == kube_node.netns.node_ip
    # The network rule: the node's namespace has no way out, only its pods' /24 and the
    # Services' range, both on the pods' bridge (kube-proxy's rules turn a ClusterIP into a
    # pod's address there).
    routes = [line.strip() for line in kube_node.netns.run(["ip", "-4", "route"]).splitlines()]
    assert sorted(routes) == [
        f"{SERVICE_CIDR} dev cni0 scope link",
        f"10.244.0.0/24 dev cni0 proto kernel scope link src {addresses['InternalIP']}",
    ]


async def test_a_scheduled_pod_runs_as_the_images_user_with_a_read_only_root(
    kube_node: Node, namespace: str
) -> None:
    script = (
        "import os\n"
        "print('uid', os.getuid(), 'gid', os.getgid())\n"
        "try:\n"
        "    open('/written', 'w')\n"
        "except OSError as exc:\n"
        "    print('root filesystem:', exc.strerror)\n"
    )
    pod = await _run_pod(kube_node, namespace, script)
    assert pod["spec"]["nodeName"] == kube_node.name  # bound by the real scheduler
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    logs = _logs(kube_node, pod)
    assert f"uid {UID} gid {UID}" in logs
    assert "root filesystem: Read-only file system" in logs


async def test_a_pod_resolves_services_and_reaches_the_api_server_in_cluster(
    kube_node: Node, namespace: str
) -> None:
    service = kube_node.control_plane.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/services",
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe"},
         "spec": {"ports": [{"port": 80}]}},
    )  # fmt: skip
    script = (
        "import json, socket, ssl, urllib.request\n"
        "print('probe is', socket.gethostbyname('probe'))\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount/'\n"
        "context = ssl.create_default_context(cafile=sa + 'ca.crt')\n"
        "request = urllib.request.Request('https://kubernetes.default.svc/version',\n"
        "    headers={'Authorization': 'Bearer ' + open(sa + 'token').read()})\n"
        "with urllib.request.urlopen(request, context=context, timeout=10) as response:\n"
        "    print('api server', json.load(response)['gitVersion'])\n"
    )
    pod = await _run_pod(kube_node, namespace, script)
    logs = _logs(kube_node, pod)
    assert pod["status"]["phase"] == "Succeeded", logs
    assert f"probe is {service['spec']['clusterIP']}" in logs
    assert f"api server {kube_node.control_plane.version}" in logs


async def test_a_container_over_its_memory_limit_is_oom_killed(
    kube_node: Node, namespace: str
) -> None:
    pod = await _run_pod(kube_node, namespace, "x = bytearray(256 * 1024 * 1024)", memory="48Mi")
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled", terminated
    assert terminated["exitCode"] == 137


async def test_teardown_leaves_nothing(kube_node: Node, namespace: str) -> None:
    """Last in the module: a pod still running, then the node's own teardown."""
    await _default_account(kube_node, namespace)
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sleeper", "namespace": namespace},
        "spec": {"containers": [{"name": "sleep", "image": _image(kube_node, "listener"),
                                 "imagePullPolicy": "Never",
                                 "command": ["python", "-c", "import time; time.sleep(600)"]}]},
    }  # fmt: skip
    kube_node.control_plane.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    async def running() -> bool:
        status = _get(kube_node, f"/api/v1/namespaces/{namespace}/pods/sleeper")["status"]
        assert status.get("phase") == "Running", status
        return True

    await eventually(running, within=60, interval=0.3, what="the sleeper pod running")
    containers = cgroup_pids(kube_node.cgroup_root)
    assert containers, "no process in the node's cgroups while a pod runs"
    kube_node.stop()
    assert kube_node.leftovers() == []
    gone = [pid for pid in containers if _alive(pid)]
    assert gone == [], f"container processes still alive: {gone}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
