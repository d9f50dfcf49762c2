"""The configuration files of the node's parts, as data (docs/node.md says why each setting).

Every path is in the node's folder; nothing is written to /etc, /var/lib or /opt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The cluster's Service range (the control plane's) and the DNS Service's address in it.
SERVICE_RANGE = "10.0.0.0/24"
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class Layout:
    """Where each part keeps its files, under the node's folder."""

    folder: Path

    @property
    def containerd_config(self) -> Path:
        return self.folder / "containerd.toml"

    @property
    def containerd_root(self) -> Path:
        return self.folder / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.folder / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.folder / "containerd" / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.folder / "cni" / "net.d"

    @property
    def cni_state(self) -> Path:
        return self.folder / "cni" / "state"

    @property
    def kubelet_root(self) -> Path:
        return self.folder / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.folder / "pod-logs"

    @property
    def kubelet_config(self) -> Path:
        return self.folder / "kubelet.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.folder / "kube-proxy.yaml"

    @property
    def corefile(self) -> Path:
        return self.folder / "Corefile"

    @property
    def runtime_endpoint(self) -> str:
        return f"unix://{self.containerd_socket}"


def containerd_toml(layout: Layout, *, bin_dir: Path, sandbox_image: str) -> str:
    """containerd 2.x's config (version 3): its root, state and socket in the node's folder,
    the CRI runtime ``runc`` (cgroupfs) with the sandbox refusing to lower oom_score_adj."""
    cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
    runc = f"{cri_runtime}.containerd.runtimes.runc"
    lines = [
        "version = 3",
        f"root = {json.dumps(str(layout.containerd_root))}",
        f"state = {json.dumps(str(layout.containerd_state))}",
        f"temp = {json.dumps(str(layout.folder / 'containerd' / 'tmp'))}",
        "[grpc]",
        f"  address = {json.dumps(str(layout.containerd_socket))}",
        "[ttrpc]",
        f"  address = {json.dumps(str(layout.containerd_socket) + '.ttrpc')}",
        "[plugins.'io.containerd.internal.v1.opt']",
        f"  path = {json.dumps(str(layout.folder / 'containerd' / 'opt'))}",
        "[plugins.'io.containerd.nri.v1.nri']",
        "  disable = true",
        "[plugins.'io.containerd.cri.v1.images']",
        "  snapshotter = 'overlayfs'",
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f"  sandbox = {json.dumps(sandbox_image)}",
        f"[{cri_runtime}]",
        # The sandbox refuses a process lowering its oom_score_adj (no CAP_SYS_RESOURCE):
        # without this every pod sandbox fails to start.
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        "  enable_cdi = false",
        f"[{cri_runtime}.containerd]",
        "  default_runtime_name = 'runc'",
        f"[{runc}]",
        "  runtime_type = 'io.containerd.runc.v2'",
        f"[{runc}.options]",
        "  SystemdCgroup = false",
        f"  BinaryName = {json.dumps(str(bin_dir / 'runc'))}",
        f"  Root = {json.dumps(str(layout.folder / 'runc'))}",
        f"[{cri_runtime}.cni]",
        f"  bin_dirs = [{json.dumps(str(bin_dir / 'cni'))}]",
        f"  conf_dir = {json.dumps(str(layout.cni_conf_dir))}",
        "[plugins.'io.containerd.grpc.v1.cri']",
        "  stream_server_address = '127.0.0.1'",
    ]
    return "\n".join(lines) + "\n"


def cni_conflist(layout: Layout, *, subnet: str, gateway: str) -> dict[str, Any]:
    """The pods' network: the namespace's bridge (which already holds the node's address,
    the gateway) with host-local addresses on its /24, and a route to the Service range
    through the node only. No masquerade, no default route."""
    return {
        "cniVersion": "1.0.0",
        "name": "arcflow-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                    "routes": [{"dst": SERVICE_RANGE}],
                    "dataDir": str(layout.cni_state),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(layout: Layout, *, ca: Path, cgroup_root: str) -> dict[str, Any]:
    """KubeletConfiguration for a cgroup v1 host without systemd or swap limits."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # kubelet >= 1.35 refuses cgroup v1 unless told; this host cannot have v2.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        # Pods' cgroups under a root of this node's own, in every v1 hierarchy.
        "cgroupRoot": cgroup_root,
        "failSwapOn": False,
        # Never write node-wide limits.
        "enforceNodeAllocatable": [],
        "containerRuntimeEndpoint": layout.runtime_endpoint,
        "imageServiceEndpoint": layout.runtime_endpoint,
        "podLogsDir": str(layout.pod_logs),
        "address": "0.0.0.0",  # inside the node's namespace only
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        # The host's resolv.conf names resolvers outside: pods get the cluster's DNS only.
        "resolvConf": "",
        # The host's disk and memory are shared: never evict or collect images for them.
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        # The pods' /24 holds 253 addresses; the default of 110 pods would cap a 200-job burst
        # (benchmarks/node.py) below what the network gives.
        "maxPods": 250,
        "registerNode": True,
        "syncFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "fileCheckFrequency": "5s",
        "staticPodPath": "",
        "logging": {"verbosity": 1},
    }


def kube_proxy_config(
    *, kubeconfig: Path, node_name: str, cluster_cidr: str, healthz_port: int
) -> dict[str, Any]:
    """iptables mode; the conntrack and sysctl settings it would change host-wide left alone."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "clusterCIDR": cluster_cidr,
        "bindAddress": "0.0.0.0",  # inside the node's namespace only
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def corefile(*, node_ip: str, kubeconfig: Path, ready_port: int) -> str:
    """CoreDNS on the node's address: the cluster's names only, nothing forwarded outside."""
    return (
        ".:53 {\n"
        f"    bind {node_ip}\n"
        "    errors\n"
        "    log\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig} admin\n"
        "        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n"
        "    }\n"
        f"    ready 127.0.0.1:{ready_port}\n"
        "    cache 5\n"
        "}\n"
    )
