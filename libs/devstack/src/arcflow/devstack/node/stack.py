"""``arcflow dev --kube node``: the dev stack's parts on a real node (docs/node.md, "The dev
stack on the node").

:class:`NodeStack` starts a :class:`~arcflow.devstack.node.Node`, installs arcflow on it with helm
as a user does (:mod:`arcflow.devstack.node.release`: the services and NATS as pods from their
images), and gives the dev stack what it needs to drive and watch the demo from the host:

- the Actions simulator in the dev stack's own process, on the host's loopback, published on the
  node's address (:meth:`~arcflow.devstack.node.netns.NetworkNamespace.publish`) and advertising
  that address, so the services, the listener pod and the runner pods reach it;
- NATS' Service forwarded to the host's loopback, with the release's auditor identity (read-only:
  the live view's feed reads the event streams through ephemeral consumers, as ``arcflow
  audit`` does);
- the admin's kubeconfig of the node's API server.

It yields the same :class:`~arcflow.devstack.factory.StackParts` as the other backends, with no
service processes and no pod runner: the kubelet runs every pod. :class:`NodePods` turns the
pods the stack watches into the records the view and the summary read.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcflow.common.kube import KubeClient, KubeSettings
from arcflow.devstack.factory import StackParts, StackStartError, StartsInOrder
from arcflow.devstack.nats_server import free_port
from arcflow.devstack.node import release
from arcflow.devstack.node.cluster import Node, NodeError
from arcflow.devstack.node.images import ImageError, buildah_missing
from arcflow.devstack.node.nats import CLIENT_PORT
from arcflow.devstack.node.netns import NetnsError, tools_missing
from arcflow.devstack.pod_runner import PodRecord
from arcflow.devstack.pod_spec import classify_pod

NODE = "node"
#: Seconds for the services' and NATS' pods to become Ready after ``helm install``.
READY_WITHIN = 180.0
#: Seconds for NATS to answer through the relay once its pod is Ready.
NATS_WITHIN = 30.0


def node_refusal() -> str | None:
    """Why a node cannot start on this machine (not root, a host tool missing), or None."""
    if os.geteuid() != 0:
        return "--kube node needs root (network namespaces, cgroups, mounts)"
    missing = tools_missing() + (["buildah"] if buildah_missing() else [])
    if missing:
        return f"--kube node needs {', '.join(missing)} on PATH"
    return None


def on_node(ars: Mapping[str, Any], runner_image: str) -> dict[str, Any]:
    """The example with every pod template (the set's and each variant's own) replaced by the
    runner image's, which plays GitHub's runner against the simulator: the example's image
    cannot be pulled here, and its 8 CPUs, 32 GiB and GPU do not fit a 2-core node. Names,
    labels and bounds stay as written."""
    adapted = copy.deepcopy(dict(ars))
    spec = adapted.setdefault("spec", {})
    spec["template"] = release.runner_template(runner_image)
    for variant in spec.get("runnerVariants") or []:
        if "template" in variant:
            variant["template"] = release.runner_template(runner_image)
    return adapted


StatusCallback = Callable[[str, str], None]


@dataclass
class NodeStack(StartsInOrder):
    """``async with NodeStack(work_dir) as parts:`` a node with arcflow installed, the
    simulator published to it and NATS forwarded from it."""

    work_dir: Path
    poll_timeout: float = 5.0
    kube_qps: float = 200
    kube_burst: int = 400
    on_status: StatusCallback | None = None
    node: Node | None = field(default=None, init=False)
    images: dict[str, str] = field(default_factory=dict, init=False)

    def _status(self, component: str, status: str) -> None:
        if self.on_status is not None:
            self.on_status(component, status)

    async def _start(self) -> StackParts:
        refusal = node_refusal()
        if refusal:
            raise StackStartError(refusal)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._status("images", "building or finding (scripts/build-images.sh)")
        try:
            self.images = await asyncio.to_thread(release.build_images)
        except release.ReleaseError as exc:
            raise StackStartError(f"the images: {exc}") from None
        self._status("images", f"ready ({len(self.images)})")
        node = await self._start_node()
        self._status("helm", "installing the arcflow chart and NATS")
        try:
            await asyncio.to_thread(release.install, node, self.images, self.work_dir / "helm")
            for name in release.SERVICES:
                self._status(name, "starting (pod)")
            await asyncio.to_thread(
                release.wait_ready, node, (*release.SERVICES, "nats"), READY_WITHIN
            )
        except release.ReleaseError as exc:
            raise StackStartError(f"helm install on the node: {exc}") from None
        self._status("helm", f"installed {release.RELEASE} in {release.NAMESPACE}")
        nats_url, user, password = await asyncio.to_thread(self._forward_nats, node)
        self._status("nats", f"running (pod; {nats_url} from the host)")
        simulator = await self._start_simulator(node)
        kubeconfig = str(node.control_plane.kubeconfig)
        client = await KubeClient.from_settings(
            KubeSettings(kubeconfig=kubeconfig, qps=self.kube_qps, burst=self.kube_burst)
        )
        self._exit.push_async_callback(client.close)
        return StackParts(
            temp=self.work_dir,
            nats_url=nats_url,
            kube_backend=NODE,
            kubeconfig=kubeconfig,
            kube=client,
            control_plane=node.control_plane,
            simulator=simulator,
            nats_user=user,
            nats_password=password,
        )

    async def _start_node(self) -> Node:
        self._status("kubernetes", "starting a node (control plane, containerd, kubelet, ...)")
        node = self.node = Node(images=[self.images[n] for n in release.IMAGE_NAMES], crds=[])
        # Registered first: a start that fails half way stops what did start.
        self._exit.callback(node.stop)
        began = time.monotonic()
        try:
            await asyncio.to_thread(node.start)
        except (NodeError, ImageError, NetnsError) as exc:
            raise StackStartError(f"the node did not start: {exc}") from None
        self._status(
            "kubernetes",
            f"running node {node.name} ({node.control_plane.version}, "
            f"{time.monotonic() - began:.0f}s)",
        )
        return node

    def _forward_nats(self, node: Node) -> tuple[str, str, str]:
        """NATS' Service on the host's loopback, and the auditor's credentials."""
        path = f"/api/v1/namespaces/{release.NAMESPACE}/services/nats"
        cluster_ip = str(node.control_plane.request("GET", path)["spec"]["clusterIP"])
        local = node.netns.forward(CLIENT_PORT, target=cluster_ip, local_port=free_port())
        deadline = time.monotonic() + NATS_WITHIN
        while not _nats_answers(local):
            if time.monotonic() > deadline:
                raise StackStartError(
                    f"NATS' Service {cluster_ip}:{CLIENT_PORT} sent no INFO through the relay "
                    f"on 127.0.0.1:{local} within {NATS_WITHIN:.0f}s"
                )
            time.sleep(0.2)
        user, password = release.auditor_credentials(node)
        return f"nats://127.0.0.1:{local}", user, password

    async def _start_simulator(self, node: Node) -> Any:
        from arcflow.devstack.actions_sim import ActionsSimulator

        simulator = ActionsSimulator(poll_timeout=self.poll_timeout)
        await simulator.start()
        self._exit.push_async_callback(simulator.stop)
        simulator.advertise_url = f"http://{node.netns.node_ip}:{simulator.port}"
        await asyncio.to_thread(node.netns.publish, simulator.port)
        self._status("github", f"running simulator {simulator.local_url} (pods: node address)")
        return simulator


@dataclass
class NodePods:
    """The arcflow pods the kubelet runs, as the pod runner's :class:`PodRecord` (wall-clock
    times as the stack saw them), and the release's service pods by role, from the stack's own
    watch of Pods."""

    records: dict[str, PodRecord] = field(default_factory=dict)
    services: dict[str, dict[str, Any]] = field(default_factory=dict)

    def observe(self, event_type: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        kind = classify_pod(pod)
        if kind is None:  # the listener pods live in the release's namespace too
            if meta.get("namespace") == release.NAMESPACE:
                self._observe_service(event_type, pod)
            return
        uid = str(meta.get("uid"))
        record = self.records.get(uid)
        now = time.time()
        if record is None:
            record = self.records[uid] = PodRecord(
                namespace=str(meta.get("namespace")),
                name=str(meta.get("name")),
                uid=uid,
                kind=kind,
                labels=dict(meta.get("labels") or {}),
                seen_at=now,
            )
        if event_type == "DELETED":
            record.deleted = True
            return
        state = _main_state(pod)
        if "running" in state and record.started_at is None:
            record.started_at = now
        terminated = state.get("terminated")
        if terminated and record.exit_code is None:
            record.exit_code = int(terminated.get("exitCode", 0))
            record.finished_at = now

    def _observe_service(self, event_type: str, pod: Mapping[str, Any]) -> None:
        role = release.role(pod)
        if role not in release.SERVICES:
            return
        if event_type == "DELETED" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            if self.services.get(role, {}).get("metadata", {}).get("uid") == pod["metadata"].get(
                "uid"
            ):
                self.services.pop(role, None)
            return
        self.services[role] = dict(pod)

    def service_status(self, name: str) -> str:
        """``running (pod <name>)`` when Ready, else ``starting`` with the container's reason."""
        pod = self.services.get(name)
        if pod is None:
            return "starting (no pod)"
        pod_name = pod["metadata"]["name"]
        if release.ready(pod):
            return f"running (pod {pod_name})"
        waiting = _main_state(pod).get("waiting") or {}
        reason = waiting.get("reason") or "not Ready"
        prefix = "crash loop" if reason == "CrashLoopBackOff" else "starting"
        return f"{prefix} (pod {pod_name}: {reason})"

    def restarts(self) -> dict[str, int]:
        return {
            name: sum(int(s.get("restartCount", 0)) for s in _statuses(pod))
            for name, pod in self.services.items()
        }


def _nats_answers(port: int) -> bool:
    """A NATS server greets a new connection with its ``INFO`` line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.settimeout(2)
            return conn.recv(5) == b"INFO "
    except OSError:
        return False


def _statuses(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def _main_state(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The state of the pod's first container (the runner's, the listener's, a service's)."""
    statuses = _statuses(pod)
    return dict(statuses[0].get("state") or {}) if statuses else {}


__all__ = ["NODE", "NodePods", "NodeStack", "node_refusal", "on_node"]
