"""The node side of the pod runner on a real API server: a Node, its Lease, bindings, tokens.

A kube-apiserver with kube-controller-manager but no scheduler and no kubelet leaves every pod
Pending with no node, and a listener process given the admin's kubeconfig could do far more
than its pod's Role grants. So, when the server serves them (discovery of ``/api/v1``), the pod
runner also does what a kubelet does around the containers it runs:

* :class:`NodeAgent` registers one Node (``Ready``, capacity, ``kubernetes.io/os: linux``),
  renews its Lease in ``kube-node-lease`` every ``lease_interval`` seconds (the node lifecycle
  controller marks a node whose Lease went stale NotReady and taints it) and binds each pod it
  plays to that Node through the ``pods/binding`` subresource, as the scheduler would;
* :class:`PodIdentity` gets a token for the pod's ServiceAccount from the TokenRequest API,
  bound to the pod (it stops working once the pod is gone), writes it to a file and a kubeconfig
  that names that file (``tokenFile``, re-read by the listener's client once a minute), and
  replaces the token at 80 % of its lifetime, as a kubelet rotates a projected token.

The emulator serves none of these, so there the pod runner keeps its simpler behaviour (no
Node, no binding, the node-level kubeconfig for listeners). Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import aiohttp
import yaml

from arcflow.common.kube import ConflictError, KubeApiError, KubeConnectionError, NotFoundError
from arcflow.common.kube.errors import error_from_status
from arcflow.common.kube.lite_auth import ApiConnection, kubeconfig_connection

log = logging.getLogger(__name__)

DEFAULT_NODE_NAME: Final = "arcflow-dev-node"
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
#: A kubelet renews its Lease every 10 s and declares 40 s of validity.
LEASE_INTERVAL_SECONDS: Final = 10.0
LEASE_DURATION_SECONDS: Final = 40
#: The Node's own status (its Ready heartbeat) is re-posted this often; the Lease carries the
#: liveness in between, as with a kubelet.
NODE_STATUS_EVERY_SECONDS: Final = 60.0
#: A listener's ServiceAccount token lives one hour and is replaced at 80 % of that.
TOKEN_SECONDS: Final = 3600
TOKEN_RENEW_FRACTION: Final = 0.8
NODE_IP: Final = "127.0.0.1"
_JSON: Final = "application/json"
_MERGE: Final = "application/merge-patch+json"


def _micro_time(at: float | None = None) -> str:
    """A ``MicroTime`` (the Lease's ``renewTime``): RFC 3339 with microseconds."""
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiCaller:
    """Raw JSON requests to the API server of a kubeconfig (paths the typed client has no
    method for: subresource POSTs, Nodes, Leases). Errors are :mod:`arcflow.common.kube`'s."""

    def __init__(self, connection: ApiConnection, *, timeout: float = 10.0) -> None:
        self._connection = connection
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: str | Path) -> ApiCaller:
        return cls(kubeconfig_connection(path))

    def __repr__(self) -> str:
        return f"ApiCaller(server={self._connection.server!r})"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = _JSON
    ) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        headers = {"Accept": _JSON, **self._connection.auth_headers()}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        ssl: Any = self._connection.ssl_context if self._connection.ssl_context else False
        url = f"{self._connection.server}{path}"
        try:
            async with self._session.request(
                method, url, data=data, headers=headers, ssl=ssl
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeConnectionError(f"{method} {path} failed: {type(exc).__name__}") from None
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        if status >= 400:
            raise error_from_status(status, payload)
        return payload if isinstance(payload, dict) else {}

    async def core_resources(self) -> set[str]:
        """The names ``/api/v1`` serves (``pods``, ``pods/binding``, ``nodes`` ...)."""
        listed = await self.request("GET", "/api/v1")
        return {str(r.get("name")) for r in listed.get("resources") or [] if r.get("name")}


@dataclass(frozen=True)
class Capabilities:
    """What the server serves of the kubelet's side of the API."""

    nodes: bool = False
    binding: bool = False
    token_request: bool = False

    @classmethod
    def of(cls, core: set[str]) -> Capabilities:
        return cls(
            nodes="nodes" in core and "nodes/status" in core,
            binding="pods/binding" in core,
            token_request="serviceaccounts/token" in core,
        )


def node_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "node.arcflow.dev/pod-runner": "true",
            },
        },
        "spec": {},
    }


def node_status(name: str, *, ready_since: str, heartbeat: str) -> dict[str, Any]:
    """A healthy node's status: Ready, no pressure, room for plenty of pods."""
    resources = {"cpu": "8", "memory": "32Gi", "pods": "250", "ephemeral-storage": "100Gi"}

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": ready_since,
        }

    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "enough disk"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
            condition("Ready", "True", "KubeletReady", "arcflow pod runner is posting status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": {
            "machineID": name,
            "systemUUID": name,
            "bootID": name,
            "kernelVersion": os.uname().release,
            "osImage": "arcflow pod runner",
            "containerRuntimeVersion": "arcflow://processes",
            "kubeletVersion": "arcflow-pod-runner",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


@dataclass
class NodeAgent:
    """One Node, kept Ready by a Lease heartbeat, and the binding of pods to it."""

    api: ApiCaller
    name: str = DEFAULT_NODE_NAME
    lease_interval: float = LEASE_INTERVAL_SECONDS
    node_status_every: float = NODE_STATUS_EVERY_SECONDS
    #: Lease renewals that got through (the tests and the view read it).
    renewals: int = 0
    _uid: str = field(default="", init=False, repr=False)
    _ready_since: str = field(default="", init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @property
    def lease_path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"

    async def start(self) -> NodeAgent:
        """Register the Node and its Lease now (so pods bound at once land on a Ready node),
        then keep renewing in the background."""
        await self._register()
        await self._renew_lease()
        self._task = asyncio.create_task(self._heartbeat(), name=f"node-{self.name}-lease")
        return self

    async def stop(self) -> None:
        """Stop the heartbeat. The Node stays (as with a stopped kubelet); a new pod runner of
        the same name takes it over."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _register(self) -> None:
        try:
            node = await self.api.request("POST", "/api/v1/nodes", node_manifest(self.name))
        except ConflictError:
            node = await self.api.request("GET", f"/api/v1/nodes/{self.name}")
        self._uid = str((node.get("metadata") or {}).get("uid") or "")
        self._ready_since = _time()
        await self._post_node_status()

    async def _post_node_status(self) -> None:
        status = node_status(self.name, ready_since=self._ready_since, heartbeat=_time())
        await self.api.request(
            "PATCH", f"/api/v1/nodes/{self.name}/status", {"status": status}, content_type=_MERGE
        )

    def _lease(self) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self._uid}
                ],
            },
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": _micro_time(),
            },
        }

    async def _renew_lease(self) -> None:
        try:
            await self.api.request(
                "PATCH",
                f"{self.lease_path}/{self.name}",
                {"spec": {"holderIdentity": self.name, "renewTime": _micro_time()}},
                content_type=_MERGE,
            )
        except NotFoundError:
            await self.api.request("POST", self.lease_path, self._lease())
        self.renewals += 1

    async def _heartbeat(self) -> None:
        last_status = time.monotonic()
        while True:
            await asyncio.sleep(self.lease_interval)
            try:
                await self._renew_lease()
                if time.monotonic() - last_status >= self.node_status_every:
                    await self._post_node_status()
                    last_status = time.monotonic()
            except NotFoundError:
                # The Node was deleted (kubectl delete node): register again, as a kubelet does.
                with contextlib.suppress(KubeApiError):
                    await self._register()
            except KubeApiError as exc:
                log.info("node %s: heartbeat failed (%s); retrying", self.name, type(exc).__name__)

    async def bind(self, namespace: str, pod_name: str) -> bool:
        """Bind a pod to this Node (the scheduler's part). False when it is gone or already
        bound elsewhere; the pod is then still played (its status is what the test reads)."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod_name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.name},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{pod_name}/binding"
        try:
            await self.api.request("POST", path, body)
        except (NotFoundError, ConflictError):
            return False
        return True


# --- the pod's identity ------------------------------------------------------------------------


def pod_kubeconfig(
    node_kubeconfig: Mapping[str, Any], base: Path, token_file: Path, user: str
) -> dict[str, Any]:
    """A kubeconfig with the node kubeconfig's current cluster (server and CA; a relative CA
    path made absolute) and a user that reads its bearer token from ``token_file``."""
    context_name = node_kubeconfig.get("current-context")
    contexts = {
        c.get("name"): c.get("context") or {} for c in node_kubeconfig.get("contexts") or []
    }
    cluster_name = (contexts.get(context_name) or {}).get("cluster")
    clusters = {
        c.get("name"): c.get("cluster") or {} for c in node_kubeconfig.get("clusters") or []
    }
    cluster = dict(clusters.get(cluster_name) or {})
    if not cluster.get("server"):
        raise ValueError("the node kubeconfig names no cluster server")
    ca = cluster.get("certificate-authority")
    if ca:
        cluster["certificate-authority"] = str((base / str(ca)).resolve())
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": user, "context": {"cluster": "cluster", "user": user}}],
        "current-context": user,
    }


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` (mode 0600) and swap it in at once: a reader never sees half a token."""
    partial = path.with_name(f".{path.name}.new")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(partial, path)


@dataclass
class PodIdentity:
    """The ServiceAccount token of one pod, in a kubeconfig of its own, kept fresh."""

    api: ApiCaller
    namespace: str
    pod_name: str
    pod_uid: str
    service_account: str
    folder: Path
    node_kubeconfig: Path
    seconds: int = TOKEN_SECONDS
    #: Seconds between token renewals; ``None``: :data:`TOKEN_RENEW_FRACTION` of the lifetime.
    renew_every: float | None = None
    #: Tokens issued (1 after :meth:`start`; more as it renews).
    issued: int = 0
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @property
    def token_file(self) -> Path:
        return self.folder / "token"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    async def start(self, *, wait_for_account: float = 10.0) -> PodIdentity:
        """Issue the first token (waiting a little for a ServiceAccount created just before
        the pod), write the kubeconfig, start renewing. Raises :class:`KubeApiError`."""
        deadline = time.monotonic() + wait_for_account
        while True:
            try:
                lifetime = await self._issue()
                break
            except NotFoundError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        node = yaml.safe_load(self.node_kubeconfig.read_text()) or {}
        config = pod_kubeconfig(
            node,
            self.node_kubeconfig.parent,
            self.token_file,
            f"system:serviceaccount:{self.namespace}:{self.service_account}",
        )
        _write_private(self.kubeconfig, yaml.safe_dump(config))
        self._task = asyncio.create_task(self._renew(lifetime), name=f"token-{self.pod_name}")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _issue(self) -> float:
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self.service_account}/token"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": self.seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.pod_name,
                    "uid": self.pod_uid,
                },
            },
        }
        granted = await self.api.request("POST", path, body)
        status = granted.get("status") or {}
        token = str(status.get("token") or "")
        if not token:
            raise KubeApiError("the TokenRequest answer holds no token")
        _write_private(self.token_file, token)
        self.issued += 1
        expires = str(status.get("expirationTimestamp") or "")
        try:
            at = datetime.strptime(expires, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            return max(1.0, at.timestamp() - time.time())
        except ValueError:
            return float(self.seconds)

    async def _renew(self, lifetime: float) -> None:
        wait = self.renew_every or lifetime * TOKEN_RENEW_FRACTION
        while True:
            await asyncio.sleep(wait)
            try:
                lifetime = await self._issue()
            except NotFoundError:
                return  # the pod or its ServiceAccount is gone: nothing to renew for
            except KubeApiError as exc:
                log.info(
                    "pod %s/%s: token renewal failed (%s); retrying",
                    self.namespace,
                    self.pod_name,
                    type(exc).__name__,
                )
                wait = min(30.0, max(1.0, wait / 2))  # the current token still holds a while
                continue
            wait = self.renew_every or lifetime * TOKEN_RENEW_FRACTION


__all__ = [
    "DEFAULT_NODE_NAME",
    "LEASE_INTERVAL_SECONDS",
    "NODE_IP",
    "NODE_LEASE_NAMESPACE",
    "TOKEN_SECONDS",
    "ApiCaller",
    "Capabilities",
    "NodeAgent",
    "PodIdentity",
    "node_manifest",
    "node_status",
    "pod_kubeconfig",
]
