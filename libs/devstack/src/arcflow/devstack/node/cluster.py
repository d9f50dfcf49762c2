"""A one-node Kubernetes cluster inside a network namespace of its own (docs/node.md).

``with Node(images=[...]) as node:`` starts, in ``arcflow-node-<id>``: the control plane
(:class:`ControlPlane`, advertising the node's address), kube-scheduler, containerd with its runc
shim, the kubelet, kube-proxy (iptables) and CoreDNS (a process on the node's address serving
the ``kube-dns`` Service). The test process reaches the API server on the host's loopback through
a relay (ADR 0078); ``node.control_plane.kubeconfig`` is the admin's kubeconfig. ``stop`` tears
everything down and :meth:`Node.leftovers` says what, if anything, is left.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Interface
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from arcflow.devstack.control_plane import (
    SERVICE_CIDR,
    ControlPlane,
    Process,
    repo_root,
    wait_until,
)
from arcflow.devstack.nats_server import free_port
from arcflow.devstack.node import images, teardown
from arcflow.devstack.node.configs import (
    DNS_SERVICE_IP,
    Layout,
    cni_conflist,
    containerd_toml,
    corefile,
    kube_proxy_config,
    kubelet_config,
)
from arcflow.devstack.node.netns import PREFIX, NetworkNamespace

_log = logging.getLogger(__name__)

DIR_ENV = "ARCFLOW_NODE_DIR"
BUILD_SCRIPT = Path("scripts") / "node.sh"
#: The pods' /24 and the node's address on it (the bridge's; the pods' gateway).
NODE_ADDRESS = IPv4Interface("10.244.0.1/24")
SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
#: Host-wide sysctls the kubelet sets at start (it cannot be told not to): put back at stop.
#: The kubelet's health endpoint inside the node's namespace (KubeletConfiguration healthz*).
KUBELET_HEALTHZ = "http://127.0.0.1:10248/healthz"
_PROBE = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)"
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


class NodeError(RuntimeError):
    """The node's parts are missing or one did not come up."""


def locate_parts(*, build: bool = True) -> Path:
    """``ARCFLOW_NODE_DIR``, else ``scripts/node.sh`` of the checkout (at once when built)."""
    value = os.environ.get(DIR_ENV)
    if value:
        return Path(value)
    root = repo_root()
    if root is None:
        raise NodeError(f"no node parts: set {DIR_ENV} to the folder scripts/node.sh prints")
    env = dict(os.environ)
    if not build:
        env["ARCFLOW_NODE_NO_BUILD"] = "1"
    done = subprocess.run(
        ["bash", str(root / BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise NodeError(f"{BUILD_SCRIPT} failed: {reason}")
    return Path(lines[-1])


@dataclass
class Node:
    #: Images (in buildah's store) to import into the node's containerd.
    images: Sequence[str] = ()
    parts: Path | None = None
    startup_timeout: float = 120.0
    crds: Sequence[Path] | None = None
    image_cache: Path | None = None
    ident: str = field(default_factory=lambda: secrets.token_hex(3))
    folder: Path = field(init=False)
    netns: NetworkNamespace = field(init=False)
    control_plane: ControlPlane = field(init=False)
    _processes: dict[str, Process] = field(default_factory=dict, init=False, repr=False)
    _sysctls: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.ident}"

    @property
    def cgroup_root(self) -> str:
        return f"/{self.name}"

    @property
    def layout(self) -> Layout:
        return Layout(self.folder)

    # --- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Node:
        self.parts = self.parts or locate_parts()
        self.folder = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.netns = NetworkNamespace(self.name, self.folder, NODE_ADDRESS, SERVICE_CIDR)
        try:
            self._save_sysctls()
            self.netns.create()
            self._start_control_plane()
            self._start_containerd()
            self._import_images()
            self._start_kubelet()
            self._start_scheduler_and_proxy()
            self._start_coredns()
            self._wait("the node Ready", self._node_ready)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Delete the pods, stop the kubelet, remove every sandbox, stop containerd and what is
        left in the node's cgroups, unmount, remove the cgroups, delete the namespace. Each
        phase's duration is logged (``arcflow.devstack.node``, INFO)."""
        if not hasattr(self, "folder"):
            return
        cp = getattr(self, "control_plane", None)
        with _phase("pods deleted, kubelet and the other parts stopped"):
            if cp is not None and cp.running and "kubelet" in self._processes:
                with contextlib.suppress(Exception):
                    self._delete_pods(cp)
            for name in ("coredns", "kube-proxy", "kube-scheduler", "kubelet"):
                self._stop(name)
        with _phase("sandboxes removed, containerd stopped"):
            if "containerd" in self._processes and self._processes["containerd"].alive:
                with contextlib.suppress(Exception):
                    self.crictl("rmp", "--all", "--force")
            self._stop("containerd")
            teardown.kill(teardown.cgroup_pids(self.cgroup_root))
        with _phase("control plane stopped"):
            if cp is not None:
                cp.stop()
        with _phase("processes left killed, mounts and cgroups removed, namespace deleted"):
            teardown.kill(teardown.processes_mentioning(str(self.folder)))
            teardown.kill(p for p in self.netns.pids() if p != os.getpid())
            teardown.unmount_under([self.folder])
            teardown.remove_cgroups(self.cgroup_root)
            self.netns.delete()
            self._restore_sysctls()
            teardown.remove_fixed_paths(self.folder)
        with _phase("folder removed"):
            shutil.rmtree(self.folder, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What of this node is still on the host (empty after a complete teardown)."""
        found = [f"process {p}" for p in teardown.cgroup_pids(self.cgroup_root)]
        found += [
            f"process {p} names {self.folder}"
            for p in teardown.processes_mentioning(str(self.folder))
        ]
        found += [f"mount {m}" for m in teardown.mounts_under([self.folder])]
        found += [f"cgroup {c}" for c in teardown.cgroup_dirs(self.cgroup_root)]
        found += [f"log link {link}" for link in teardown.log_links_into(self.folder)]
        if self.netns.path.exists():
            found.append(f"network namespace {self.name}")
        return found

    def restart(self, part: str) -> None:
        """Stop one of the node's processes (``kubelet``, ``containerd``, ``kube-proxy``, ...)
        and start it again with the same command, as a host's service manager would; waits
        until it serves again. Containers outlive both the kubelet and containerd (their shims
        keep them), which is what the faults of docs/node.md exercise."""
        process = self._processes[part]
        process.stop(10.0)
        process.start()
        if part == "containerd":
            self._wait("containerd's CRI again", lambda: bool(self.crictl("info")), part)
        elif part == "kubelet":
            self._wait("the kubelet serving again", self._kubelet_serving, part)

    def _kubelet_serving(self) -> bool:
        """The kubelet's own health endpoint, asked inside the node's namespace."""
        done = subprocess.run(
            self.netns.command([sys.executable, "-c", _PROBE, KUBELET_HEALTHZ]),
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    # --- parts --------------------------------------------------------------------------

    def _bin(self, name: str) -> str:
        assert self.parts is not None
        return str(self.parts / name)

    def _spawn(self, name: str, args: list[str]) -> Process:
        process = Process(name, self.netns.command(args), self.folder / f"{name}.log")
        process.start()
        self._processes[name] = process
        return process

    def _stop(self, name: str) -> None:
        process = self._processes.pop(name, None)
        if process is not None:
            process.stop(10.0)

    def _wait(self, what: str, ready: Callable[[], bool], process: str | None = None) -> None:
        watched = self._processes.get(process) if process else None
        wait_until(
            what,
            ready,
            within=self.startup_timeout,
            process=watched,
            error=NodeError,
            interval=0.2,
            tail=40,
        )

    def _start_control_plane(self) -> None:
        pki = self.folder / "control-plane" / "pki"
        self.control_plane = ControlPlane(
            folder=self.folder / "control-plane",
            network=self.netns,
            advertise_address=self.netns.node_ip,
            serving_addresses=[self.netns.node_ip, "10.0.0.1"],
            serving_names=SERVICE_NAMES,
            crds=self.crds,
            startup_timeout=self.startup_timeout,
            authorization_modes=("Node", "RBAC"),
            extra_args={
                "kube-apiserver": [
                    "--kubelet-preferred-address-types=InternalIP",
                    f"--kubelet-client-certificate={pki / 'admin.crt'}",
                    f"--kubelet-client-key={pki / 'admin.key'}",
                ]
            },
        )
        self.control_plane.start()

    def _start_containerd(self) -> None:
        layout = self.layout
        sandbox = images.ensure_pause_image()
        assert self.parts is not None
        layout.containerd_config.write_text(
            containerd_toml(layout, bin_dir=self.parts, sandbox_image=sandbox)
        )
        path = f"{self.parts}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        # containerd finds its shim (containerd-shim-runc-v2) on PATH.
        self._spawn(
            "containerd",
            [
                "env",
                f"PATH={path}",
                self._bin("containerd"),
                "--config",
                str(layout.containerd_config),
            ],
        )
        self._wait("containerd's CRI", lambda: bool(self.crictl("info")), "containerd")

    def crictl(self, *args: str) -> str:
        done = subprocess.run(
            [
                self._bin("crictl"),
                "--runtime-endpoint",
                self.layout.runtime_endpoint,
                "--image-endpoint",
                self.layout.runtime_endpoint,
                "--timeout",
                "10s",
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise NodeError(f"crictl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def _import_images(self) -> None:
        cache = self.image_cache or (repo_root() or self.folder) / ".cache" / "node-images"
        for image in [images.PAUSE_IMAGE, *self.images]:
            archive = images.export(image, cache)
            images.import_archive(Path(self._bin("ctr")), self.layout.containerd_socket, archive)

    def _start_kubelet(self) -> None:
        layout = self.layout
        cp = self.control_plane
        creds = cp.credentials
        creds.issue_client("node", f"system:node:{self.name}", "system:nodes")
        kubeconfig = cp.kubeconfig_dict(user=f"system:node:{self.name}")
        kubeconfig["users"][0]["user"] = {
            "client-certificate": str(creds.folder / "node.crt"),
            "client-key": str(creds.folder / "node.key"),
        }
        node_kubeconfig = self.folder / "node.kubeconfig"
        node_kubeconfig.write_text(yaml.safe_dump(kubeconfig))
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        conflist = cni_conflist(
            layout, subnet=str(NODE_ADDRESS.network), gateway=self.netns.node_ip
        )
        (layout.cni_conf_dir / "10-arcflow.conflist").write_text(json.dumps(conflist))
        layout.kubelet_config.write_text(
            yaml.safe_dump(kubelet_config(layout, ca=creds.ca, cgroup_root=self.cgroup_root))
        )
        self._make_cgroup_root()
        self._spawn(
            "kubelet",
            [
                self._bin("kubelet"),
                f"--config={layout.kubelet_config}",
                f"--kubeconfig={node_kubeconfig}",
                f"--root-dir={layout.kubelet_root}",
                f"--cert-dir={layout.kubelet_root / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.netns.node_ip}",
                "--v=1",
            ],
        )
        self._wait(
            "the node registered", lambda: bool(self._get(f"/api/v1/nodes/{self.name}")), "kubelet"
        )

    def _make_cgroup_root(self) -> None:
        """The kubelet wants its cgroup root to exist in every hierarchy; a new cpuset cgroup
        starts with no CPUs and memory nodes, so it gets its parent's."""
        for hierarchy in teardown.hierarchies():
            folder = hierarchy / self.cgroup_root.strip("/")
            folder.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (folder / knob).exists():
                    (folder / knob).write_text((hierarchy / knob).read_text())

    def _start_scheduler_and_proxy(self) -> None:
        kubeconfig = self.control_plane.kubeconfig
        self._spawn(
            "kube-scheduler",
            [self._bin("kube-scheduler"), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
             "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"],
        )  # fmt: skip
        healthz = self._exposed_port()
        config = kube_proxy_config(
            kubeconfig=kubeconfig,
            node_name=self.name,
            cluster_cidr=str(NODE_ADDRESS.network),
            healthz_port=healthz,
        )
        self.layout.kube_proxy_config.write_text(yaml.safe_dump(config))
        self._spawn(
            "kube-proxy", [self._bin("kube-proxy"), f"--config={self.layout.kube_proxy_config}"]
        )
        # kube-proxy's healthz answers 200 once its first sync wrote the Services' rules.
        self._wait("kube-proxy's rules", lambda: _http_ok(healthz, "/healthz"), "kube-proxy")

    def _start_coredns(self) -> None:
        ready = self._exposed_port()
        self.layout.corefile.write_text(
            corefile(
                node_ip=self.netns.node_ip,
                kubeconfig=self.control_plane.kubeconfig,
                ready_port=ready,
            )
        )
        self._spawn("coredns", [self._bin("coredns"), "-conf", str(self.layout.corefile)])
        self._create_dns_service()
        self._wait("CoreDNS ready", lambda: _http_ok(ready, "/ready"), "coredns")

    def _exposed_port(self) -> int:
        """A port free on the host's loopback, relayed from the same port inside."""
        port = free_port()
        self.netns.expose(port)
        return port

    def _create_dns_service(self) -> None:
        cp = self.control_plane
        ports = [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        ]
        cp.request(
            "POST",
            "/api/v1/namespaces/kube-system/services",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "kube-dns", "namespace": "kube-system"},
                "spec": {
                    "clusterIP": DNS_SERVICE_IP,
                    "ports": [{**p, "targetPort": 53} for p in ports],
                },
            },
        )
        cp.request(
            "POST",
            "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kube-dns-node",
                    "namespace": "kube-system",
                    "labels": {
                        "kubernetes.io/service-name": "kube-dns",
                        "endpointslice.kubernetes.io/managed-by": "arcflow-node",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [self.netns.node_ip], "conditions": {"ready": True}}],
                "ports": ports,
            },
        )

    # --- state ----------------------------------------------------------------------------

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.control_plane.request("GET", path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def _node_ready(self) -> bool:
        node = self._get(f"/api/v1/nodes/{self.name}") or {}
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in node.get("status", {}).get("conditions", [])
        )

    def _delete_pods(self, cp: ControlPlane) -> None:
        pods = cp.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={self.name}")
        for pod in pods.get("items", []):
            meta = pod["metadata"]
            with contextlib.suppress(urllib.error.HTTPError):
                cp.request(
                    "DELETE",
                    f"/api/v1/namespaces/{meta['namespace']}/pods/"
                    f"{meta['name']}?gracePeriodSeconds=0",
                )

    def _save_sysctls(self) -> None:
        for key in KUBELET_SYSCTLS:
            with contextlib.suppress(OSError):
                self._sysctls[key] = (Path("/proc/sys") / key).read_text().strip()

    def _restore_sysctls(self) -> None:
        for key, value in self._sysctls.items():
            with contextlib.suppress(OSError):
                path = Path("/proc/sys") / key
                if path.read_text().strip() != value:
                    path.write_text(value)

    def log_of(self, part: str) -> Path:
        """The log file of a part: containerd, kubelet, kube-scheduler, kube-proxy, coredns
        (the control plane's: ``node.control_plane.log_of``)."""
        return self.folder / f"{part}.log"


@contextlib.contextmanager
def _phase(what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        _log.info("node stop: %s in %.1f s", what, time.monotonic() - started)


def _http_ok(port: int, path: str) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
        return bool(response.status == 200)
