"""Upstream actions-runner-controller as a peer on the dev stack's real control plane.

ADR 0060 and docs/benchmarks/vs-arc.md: upstream's controller and its scale-set listener are
built from the Go module proxy (``scripts/arc.sh``, module ``compat/arc``) and run on the same
kube-apiserver, Actions simulator and pod runner as arcflow, so the two can be measured side
by side. This module holds what that takes:

* :func:`locate_arc`: the built binaries and the module's source folder (``scripts/arc.sh``);
* :func:`render_controller_chart` / :func:`render_scale_set_chart`: ``helm template`` of the
  module's own ``gha-runner-scale-set-controller`` and ``gha-runner-scale-set`` charts, read
  from the module cache at run time (never copied into this repository), split by kind;
* :class:`ArcController`: the controller binary as a local process with a kubeconfig of the
  chart's ServiceAccount (so the API server's audit log names it), its arguments and env taken
  from the chart's Deployment;
* the pod runner's side of an upstream **listener pod** (:func:`is_upstream_listener_pod`,
  :func:`listener_config`, :func:`listener_env`, :func:`listener_command`): upstream's
  listener reads its config from the file ``LISTENER_CONFIG_PATH`` names and reaches the API
  server only through the in-cluster convention (``KUBERNETES_SERVICE_HOST``/``PORT`` and the
  ServiceAccount files under :data:`SERVICE_ACCOUNT_DIR`; docs/upstream-behaviour.md, "Upstream
  ARC v0.27.6 as a peer").
  So the pod runner runs it in a mount namespace of its own with the pod's token folder bound
  on that path, as a kubelet mounts the projected token volume. Runner pods need nothing new.

Nothing here logs a token, a JIT config or a config file's content.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from arcflow.devstack.child_process import set_parent_death_signal
from arcflow.devstack.control_plane import ControlPlane, repo_root
from arcflow.devstack.identities import KubeIdentities, run_helm_template

MODULE: Final = "github.com/actions/actions-runner-controller"
BUILD_SCRIPT: Final = Path("scripts") / "arc.sh"
CONTROLLER_CHART: Final = Path("charts") / "gha-runner-scale-set-controller"
SCALE_SET_CHART: Final = Path("charts") / "gha-runner-scale-set"
#: The path upstream's listener (client-go's in-cluster config) reads its token and CA from.
SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: The command upstream's controller gives the listener container (its image's binary).
LISTENER_COMMAND: Final = "/github-runnerscaleset-listener"
LISTENER_BINARY: Final = "github-runnerscaleset-listener"
CONTROLLER_BINARY: Final = "manager"
#: Upstream's chart values the peer runs with: the chart's defaults, but info logs (its
#: default is debug, which costs the controller and every listener CPU on each message).
CONTROLLER_VALUES: Final[Mapping[str, Any]] = {"flags": {"logLevel": "info"}}
_STOP_GRACE_SECONDS = 10.0


class ArcPeerError(RuntimeError):
    """The peer cannot be built, rendered or started; the text says why (no secret in it)."""


@dataclass(frozen=True)
class ArcBuild:
    bin_dir: Path
    module_dir: Path
    version: str

    @property
    def controller(self) -> Path:
        return self.bin_dir / CONTROLLER_BINARY

    @property
    def listener(self) -> Path:
        return self.bin_dir / LISTENER_BINARY


def locate_arc(*, timeout: float = 1800.0) -> ArcBuild:
    """Build (or reuse) upstream's binaries with ``scripts/arc.sh`` and say where they are."""
    root = repo_root()
    if root is None or not (root / BUILD_SCRIPT).is_file():
        raise ArcPeerError("no checkout with scripts/arc.sh to build upstream ARC from")
    try:
        done = subprocess.run(
            [str(root / BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ArcPeerError(f"scripts/arc.sh did not finish within {timeout:.0f}s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise ArcPeerError(f"scripts/arc.sh failed ({done.returncode}): {tail}")
    found = dict(
        line.split("=", 1) for line in done.stdout.splitlines() if "=" in line and line.isascii()
    )
    try:
        build = ArcBuild(Path(found["BIN_DIR"]), Path(found["MODULE_DIR"]), found["VERSION"])
    except KeyError as exc:
        raise ArcPeerError(f"scripts/arc.sh printed no {exc.args[0]}") from None
    for path in (build.controller, build.listener, build.module_dir / CONTROLLER_CHART):
        if not path.exists():
            raise ArcPeerError(f"scripts/arc.sh left no {path}")
    return build


# --- charts -------------------------------------------------------------------------------


def helm_template(
    chart: Path,
    release: str,
    namespace: str,
    values: Mapping[str, Any],
    folder: Path,
    *,
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    """``helm template`` of a chart with ``values``: its documents, in order."""
    done = run_helm_template(
        chart,
        release,
        namespace,
        values,
        folder,
        helm_home=folder / ".helm",
        extra_args=["--include-crds"] if include_crds else [],
    )
    if done.returncode != 0:
        raise ArcPeerError(f"helm template {chart.name} failed: {done.stderr.strip()[:500]}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@dataclass(frozen=True)
class ControllerChart:
    """The rendered controller chart, by role."""

    crds: list[dict[str, Any]]
    #: ServiceAccount, ClusterRole(Binding), Role(Binding): what the peer applies.
    rbac: list[dict[str, Any]]
    deployment: dict[str, Any]

    @property
    def service_account(self) -> tuple[str, str]:
        """(namespace, name) of the controller's ServiceAccount."""
        for doc in self.rbac:
            if doc["kind"] == "ServiceAccount":
                return str(doc["metadata"]["namespace"]), str(doc["metadata"]["name"])
        raise ArcPeerError("the controller chart rendered no ServiceAccount")


RBAC_KINDS: Final = frozenset(
    {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
)


def render_controller_chart(
    build: ArcBuild, folder: Path, *, release: str = "arc", namespace: str = "arc-systems"
) -> ControllerChart:
    docs = helm_template(
        build.module_dir / CONTROLLER_CHART,
        release,
        namespace,
        CONTROLLER_VALUES,
        folder,
        include_crds=True,
    )
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    for doc in rbac:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"].setdefault("namespace", namespace)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    if len(crds) != 4 or not rbac or len(deployments) != 1:
        raise ArcPeerError(
            f"the controller chart rendered {len(crds)} CRDs, {len(rbac)} RBAC objects and "
            f"{len(deployments)} Deployments (expected 4, some, 1)"
        )
    return ControllerChart(crds, rbac, deployments[0])


def write_crds(chart: ControllerChart, folder: Path) -> list[Path]:
    """The chart's CRDs as files (what :class:`ControlPlane` installs before its controller
    manager starts, so the garbage collector knows the kinds from the beginning)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for crd in chart.crds:
        path = folder / f"{crd['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(crd))
        paths.append(path)
    return paths


def render_scale_set_chart(
    build: ArcBuild,
    folder: Path,
    *,
    release: str,
    namespace: str,
    config_url: str,
    token: str,
    controller_service_account: tuple[str, str],
    max_runners: int | None = None,
    min_runners: int | None = None,
    runner_image: str = "ghcr.io/actions/actions-runner:latest",
) -> list[dict[str, Any]]:
    """One ``gha-runner-scale-set`` release: the ARS, its GitHub Secret, the runners'
    ServiceAccount and the controller's Role in the namespace, as ``helm install`` makes them.
    The controller's ServiceAccount is given (helm's ``lookup`` finds nothing offline)."""
    values: dict[str, Any] = {
        "githubConfigUrl": config_url,
        "githubConfigSecret": {"github_token": token},
        "controllerServiceAccount": {
            "namespace": controller_service_account[0],
            "name": controller_service_account[1],
        },
        "template": {
            "spec": {
                "containers": [
                    {"name": "runner", "image": runner_image, "command": ["/home/runner/run.sh"]}
                ]
            }
        },
    }
    if max_runners is not None:
        values["maxRunners"] = max_runners
    if min_runners is not None:
        values["minRunners"] = min_runners
    docs = helm_template(build.module_dir / SCALE_SET_CHART, release, namespace, values, folder)
    for doc in docs:
        doc["metadata"].setdefault("namespace", namespace)
    return docs


# --- the controller process ----------------------------------------------------------------


def controller_invocation(
    deployment: Mapping[str, Any], namespace: str
) -> tuple[list[str], dict[str, str]]:
    """(arguments, env) of the chart Deployment's ``manager`` container: literal ``value``
    env entries, ``fieldRef: metadata.namespace`` resolved to ``namespace``."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    manager = next((c for c in containers if c.get("name") == "manager"), containers[0])
    env: dict[str, str] = {}
    for entry in manager.get("env") or []:
        if isinstance(entry.get("value"), str):
            env[entry["name"]] = entry["value"]
            continue
        ref = (entry.get("valueFrom") or {}).get("fieldRef") or {}
        if ref.get("fieldPath") == "metadata.namespace":
            env[entry["name"]] = namespace
    return [str(a) for a in manager.get("args") or []], env


@dataclass
class ArcController:
    """Upstream's controller binary as a local process (the chart's Deployment, one replica)."""

    binary: Path
    kubeconfig: Path
    args: Sequence[str]
    env: Mapping[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> ArcController:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env.update(self.env)
        env["KUBECONFIG"] = str(self.kubeconfig)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                [str(self.binary), *self.args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
                # Linux: SIGTERM when the harness dies, even by SIGKILL (no orphan controller).
                preexec_fn=set_parent_death_signal if sys.platform == "linux" else None,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_started(self, within: float = 60.0) -> None:
        """Until the log says its controllers started (or it died: then the log's tail)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.alive:
                raise ArcPeerError(f"upstream's controller exited: {self.tail()}")
            with contextlib.suppress(OSError):
                if "Starting workers" in self.log_path.read_text(errors="replace"):
                    return
            time.sleep(0.2)
        raise ArcPeerError(f"upstream's controller did not start its workers: {self.tail()}")

    def tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- listener pods (the pod runner's side) -----------------------------------------------------


def upstream_listener_container(pod: Mapping[str, Any]) -> str | None:
    """The name of the container that runs upstream's listener binary (upstream calls it
    ``autoscaler``), or ``None``: arcflow's listener pods run ``python -m arcflow.listener``."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        command = [str(c) for c in container.get("command") or []]
        if command and command[0].endswith(LISTENER_COMMAND):
            return str(container.get("name") or "")
    return None


def is_upstream_listener_pod(pod: Mapping[str, Any]) -> bool:
    return upstream_listener_container(pod) is not None


def listener_config(config_text: str, metrics_port: int) -> str:
    """Upstream's config.json, with its own metrics port if it serves metrics (local processes
    share one network namespace). Raises ``ValueError`` (naming no value) when malformed."""
    try:
        config = json.loads(config_text)
    except json.JSONDecodeError:
        raise ValueError("config.json is not valid JSON") from None
    if not isinstance(config, dict):
        raise ValueError("config.json is not a JSON object")
    if config.get("metricsAddr"):
        config["metricsAddr"] = f"127.0.0.1:{metrics_port}"
    return json.dumps(config)


def in_cluster_target(node_kubeconfig: Path) -> tuple[str, str, bytes]:
    """(host, port, CA PEM) of the API server the node kubeconfig names: what a kubelet puts
    in ``KUBERNETES_SERVICE_HOST``/``PORT`` and the ServiceAccount volume's ``ca.crt``."""
    config = yaml.safe_load(node_kubeconfig.read_text()) or {}
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    cluster_name = (contexts.get(config.get("current-context")) or {}).get("cluster")
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    cluster = clusters.get(cluster_name) or {}
    server = urlsplit(str(cluster.get("server") or ""))
    if server.scheme != "https" or not server.hostname:
        raise ValueError("the node kubeconfig names no https server")
    if cluster.get("certificate-authority-data"):
        ca = base64.b64decode(str(cluster["certificate-authority-data"]))
    elif cluster.get("certificate-authority"):
        path = Path(str(cluster["certificate-authority"]))
        if not path.is_absolute():
            path = node_kubeconfig.parent / path
        ca = path.read_bytes()
    else:
        raise ValueError("the node kubeconfig names no certificate authority")
    return server.hostname, str(server.port or 443), ca


def write_service_account_files(folder: Path, namespace: str, ca: bytes) -> None:
    """``ca.crt`` and ``namespace`` beside the ``token`` the pod runner's identity writes."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_bytes(ca)
    (folder / "namespace").write_text(namespace)


def listener_env(
    pod_env: Mapping[str, str], host: str, port: str, config_path: Path
) -> dict[str, str]:
    """The listener container's env as a kubelet gives it: the pod's own entries, the service
    env of the ``kubernetes`` Service, and ``LISTENER_CONFIG_PATH`` pointed at the local copy
    of the mounted config (the pod names the mount path, which is not emulated)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        **pod_env,
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
    }
    env["LISTENER_CONFIG_PATH"] = str(config_path)
    return env


def listener_command(binary: Path, service_account_folder: Path) -> list[str]:
    """Run ``binary`` in a mount namespace of its own where ``service_account_folder`` is bound
    on :data:`SERVICE_ACCOUNT_DIR` (a kubelet's projected token volume). Needs root (or
    CAP_SYS_ADMIN) and ``unshare``; :func:`check_mount_namespaces` says whether it works."""
    script = 'mount --bind "$1" "$2" && exec "$3"'
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "listener",
        str(service_account_folder),
        str(SERVICE_ACCOUNT_DIR),
        str(binary),
    ]


def check_mount_namespaces() -> str | None:
    """``None`` when :func:`listener_command` can work here, else the reason it cannot."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare(1) and mount(8) are needed to give upstream's listener its token"
    try:
        SERVICE_ACCOUNT_DIR.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create {SERVICE_ACCOUNT_DIR} ({exc.strerror}): run as root"
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if done.returncode != 0:
        return f"no mount namespaces here: {done.stderr.strip()[:200]}"
    return None


# --- the whole peer on a running stack -------------------------------------------------------


@dataclass
class ArcPeer:
    """Upstream's controller on a real control plane the dev stack runs: its chart's CRDs
    (replacing arcflow's: the same kinds, upstream's schema), its RBAC, its controller process
    as the chart's ServiceAccount, and the pod runner told to play upstream's listener pods.

    ``start`` and ``stop`` are synchronous (subprocesses and short HTTP calls): async callers
    run them in a thread."""

    build: ArcBuild
    plane: ControlPlane
    folder: Path
    namespace: str = "arc-systems"
    release: str = "arc"
    token_seconds: int = 7200
    chart: ControllerChart | None = field(default=None, init=False)
    controller: ArcController | None = field(default=None, init=False)
    _identities: KubeIdentities | None = field(default=None, init=False, repr=False)

    def start(self, pod_runner: Any = None, *, within: float = 90.0) -> ArcPeer:
        """``pod_runner``: a :class:`~arcflow.devstack.pod_runner.PodRunner` to play upstream's
        listener pods (not imported here: the pod runner imports this module)."""
        chart = self.chart = render_controller_chart(
            self.build, self.folder / "chart", release=self.release, namespace=self.namespace
        )
        self.plane.install_crds(write_crds(chart, self.folder / "crds"))
        identities = self._identities = KubeIdentities(self.plane, self.folder)
        identities.apply(chart.rbac)
        namespace, account = chart.service_account
        token = self.plane.create_token(namespace, account, seconds=self.token_seconds)
        kubeconfig = self.plane.write_kubeconfig(
            self.folder / "controller.kubeconfig",
            token=token,
            user=f"system:serviceaccount:{namespace}:{account}",
            namespace=namespace,
        )
        args, env = controller_invocation(chart.deployment, self.namespace)
        self.controller = ArcController(
            self.build.controller, kubeconfig, args, env, self.folder / "controller.log"
        ).start()
        if pod_runner is not None:
            pod_runner.upstream_listener_binary = self.build.listener
        self.controller.wait_started(within)
        return self

    @property
    def username(self) -> str:
        assert self.chart is not None
        namespace, account = self.chart.service_account
        return f"system:serviceaccount:{namespace}:{account}"

    def apply(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Create documents as the admin (a ``helm install`` of a scale-set release)."""
        assert self._identities is not None
        self._identities.apply(documents)

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
