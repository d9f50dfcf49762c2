"""A network namespace of the node's own, and the relays that cross into it (ADR 0078).

Everything of the node (the control plane, kubelet, containerd, kube-proxy, CoreDNS, the pods'
bridge and addresses, the Services' ClusterIPs) lives in ``arcflow-node-<id>``: loopback, one
bridge ``cni0`` holding the node's address on a private /24, no other interface, no default
route. Nothing in it can reach the host's network or beyond.

The test process stays on the host. :meth:`NetworkNamespace.expose` makes a port of the
namespace's loopback answer on the same port of the host's loopback through two ``socat``
processes joined by a unix socket in the node's folder (a unix socket is a file, so it crosses
network namespaces): the host side listens on 127.0.0.1, the namespace side connects to its own
127.0.0.1 (:meth:`NetworkNamespace.forward`: or to a Service's ClusterIP).
:meth:`NetworkNamespace.publish` is the other direction, for a process of the host that pods must
reach (the dev stack's Actions simulator): the namespace side listens on the node's address.

Processes enter the namespace with ``nsenter --net`` (not ``ip netns exec``, which also gives
each command a mount namespace of its own: the kubelet's volume mounts must be seen by
containerd and runc).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Interface
from pathlib import Path

from arcflow.devstack.control_plane import Process

PREFIX = "arcflow-node-"
BRIDGE = "cni0"


class NetnsError(RuntimeError):
    """A command setting the namespace up failed."""


def _run(args: Sequence[str]) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


@dataclass
class NetworkNamespace:
    """``arcflow-node-<id>`` with ``lo`` up and the bridge holding ``address`` (the node's
    address and the pods' gateway). Implements the control plane's ``Network``."""

    name: str
    folder: Path
    #: The node's address with its prefix, e.g. ``10.244.0.1/24``: the pods' /24.
    address: IPv4Interface
    #: The Services' ClusterIP range, routed to the bridge so that a process of the node (the
    #: relays of :meth:`forward`) reaches a Service as a node's own processes do; kube-proxy's
    #: rules then send it to a pod on the bridge. ``None``: no such route.
    service_cidr: str | None = None
    _relays: dict[str, list[Process]] = field(default_factory=dict, init=False, repr=False)

    @property
    def path(self) -> Path:
        return Path("/run/netns") / self.name

    @property
    def node_ip(self) -> str:
        return str(self.address.ip)

    def create(self) -> NetworkNamespace:
        _run(["ip", "netns", "add", self.name])
        try:
            self.run(["ip", "link", "set", "lo", "up"])
            self.run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            self.run(["ip", "addr", "add", str(self.address), "dev", BRIDGE])
            self.run(["ip", "link", "set", BRIDGE, "up"])
            if self.service_cidr:
                self.run(["ip", "route", "add", self.service_cidr, "dev", BRIDGE])
            # Inside this namespace only: Service traffic between pods on the bridge goes
            # through kube-proxy's rules, and the node forwards between its pods.
            self.run(["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"])
            self.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        except BaseException:
            self.delete()
            raise
        return self

    def command(self, args: Sequence[str]) -> list[str]:
        return ["nsenter", f"--net={self.path}", "--", *args]

    def run(self, args: Sequence[str]) -> str:
        return _run(self.command(args))

    def expose(self, port: int) -> None:
        """Make the namespace's ``127.0.0.1:port`` answer on the host's ``127.0.0.1:port``."""
        self.forward(port)

    def forward(
        self, port: int, *, target: str = "127.0.0.1", local_port: int | None = None
    ) -> int:
        """Make ``target:port`` as seen inside the namespace (its loopback by default, or a
        Service's ClusterIP, which kube-proxy's rules answer there too) answer on the host's
        ``127.0.0.1:local_port`` (default: the same port). Returns the host's port."""
        local = local_port or port
        if f"relay-{local}" in self._relays:
            return local
        socket = self.folder / f"relay-{local}.sock"
        inside = Process(
            f"relay-{local}-in",
            self.command(
                ["socat", f"UNIX-LISTEN:{socket},fork,unlink-early", f"TCP:{target}:{port}"]
            ),
            self.folder / f"relay-{local}.log",
        )
        outside = Process(
            f"relay-{local}-out",
            [
                "socat",
                f"TCP-LISTEN:{local},bind=127.0.0.1,reuseaddr,fork",
                f"UNIX-CONNECT:{socket}",
            ],
            self.folder / f"relay-{local}.log",
        )
        self._start_relay(f"relay-{local}", listening=inside, connecting=outside, socket=socket)
        return local

    def publish(self, port: int) -> None:
        """The other way: make the host's ``127.0.0.1:port`` (a process of the host, such as
        the dev stack's Actions simulator) answer on the node's address inside the namespace,
        where pods reach it."""
        if f"publish-{port}" in self._relays:
            return
        socket = self.folder / f"publish-{port}.sock"
        outside = Process(
            f"publish-{port}-out",
            ["socat", f"UNIX-LISTEN:{socket},fork,unlink-early", f"TCP:127.0.0.1:{port}"],
            self.folder / f"publish-{port}.log",
        )
        inside = Process(
            f"publish-{port}-in",
            self.command(
                [
                    "socat",
                    f"TCP-LISTEN:{port},bind={self.node_ip},reuseaddr,fork",
                    f"UNIX-CONNECT:{socket}",
                ]
            ),
            self.folder / f"publish-{port}.log",
        )
        self._start_relay(f"publish-{port}", listening=outside, connecting=inside, socket=socket)

    def _start_relay(
        self, name: str, *, listening: Process, connecting: Process, socket: Path
    ) -> None:
        """Start the side that listens on the unix socket, wait for the socket, then the side
        that connects to it."""
        listening.start()
        deadline = time.monotonic() + 10
        while not socket.exists():
            if not listening.alive or time.monotonic() > deadline:
                raise NetnsError(f"{name}: no unix socket {socket}:\n{listening.tail()}")
            time.sleep(0.02)
        connecting.start()
        self._relays[name] = [listening, connecting]

    def pids(self) -> list[int]:
        """Every process inside the namespace."""
        done = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False
        )
        return [int(p) for p in done.stdout.split()]

    def delete(self) -> None:
        """Stop the relays, then remove the namespace (its bridge, addresses and iptables rules
        go with it). Processes still inside must be stopped before."""
        for processes in self._relays.values():
            for process in processes:
                # socat forks a child per connection, in the same process group.
                if process.popen is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.popen.pid, signal.SIGTERM)
                process.stop(2.0)
        self._relays.clear()
        for pattern in ("relay-*.sock", "publish-*.sock"):
            for socket in self.folder.glob(pattern):
                socket.unlink(missing_ok=True)
        if self.path.exists():
            with contextlib.suppress(NetnsError):
                _run(["ip", "netns", "delete", self.name])


def exists(name: str) -> bool:
    return (Path("/run/netns") / name).exists()


def tools_missing() -> list[str]:
    """The host commands the namespace needs that are not on PATH."""
    return [tool for tool in ("ip", "nsenter", "socat", "iptables") if shutil.which(tool) is None]
