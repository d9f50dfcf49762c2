"""arcflow installed with helm on a :class:`~arcflow.devstack.node.Node`, as a user installs it
(docs/node.md, "helm install on the node"): the images a release needs, the values a user
writes, ``helm install`` of the umbrella chart, NATS beside it, and waiting for the pods.

Used by ``arcflow dev --kube node`` (:mod:`arcflow.devstack.node.stack`) and by the tests and
benchmarks on the node, so each installs the same way.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from arcflow.devstack.control_plane import repo_root
from arcflow.devstack.identities import UMBRELLA_CHART, helm_binary
from arcflow.devstack.node import nats as node_nats
from arcflow.devstack.node.cluster import Node
from arcflow.devstack.node.images import ImageError, runner_image

NAMESPACE = "arc-system"
RELEASE = "arcflow"
SERVICES = ("watcher", "registrar", "reconciler")
#: Where the services reach NATS: its Service's name, as the charts' users write it.
NATS_URL = f"nats://nats.{NAMESPACE}.svc:{node_nats.CLIENT_PORT}"
#: The images a release runs, by name: the three services', the listener's, the runner's and
#: NATS'.
IMAGE_NAMES = (*SERVICES, "listener", "runner", "nats")


class ReleaseError(RuntimeError):
    """An image could not be built, helm refused, or a pod did not become Ready."""


def charts_dir() -> Path:
    root = repo_root()
    if root is None:
        raise ReleaseError("the charts are in a checkout of arcflow: run from one")
    return Path(root) / "deploy" / "helm"


def build_images(*, build: bool = True) -> dict[str, str]:
    """The images by name (``"watcher"``, ..., ``"runner"``, ``"nats"``): the four chart images
    and the runner image of ``scripts/build-images.sh`` (built unless ``build`` is False or
    ``ARCFLOW_NO_IMAGES`` is set: then as they are), and the NATS image."""
    root = repo_root()
    if root is None:
        raise ReleaseError("scripts/build-images.sh is in a checkout of arcflow: run from one")
    script = str(Path(root) / "scripts" / "build-images.sh")
    if build and not os.environ.get("ARCFLOW_NO_IMAGES"):
        done = subprocess.run(["bash", script], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ReleaseError(f"scripts/build-images.sh failed:\n{done.stderr[-3000:]}")
    printed = subprocess.run(
        ["bash", script, "--print"], capture_output=True, text=True, check=False
    )
    if printed.returncode != 0:
        raise ReleaseError(f"scripts/build-images.sh --print failed: {printed.stderr[-800:]}")
    found = {image.rsplit("/", 1)[-1].split(":")[0]: image for image in printed.stdout.split()}
    if "listener" not in found:
        raise ReleaseError(f"scripts/build-images.sh --print named no listener image: {found}")
    found["runner"] = runner_image(found["listener"])
    try:
        found["nats"] = node_nats.ensure_nats_image()
    except ImageError as exc:
        raise ReleaseError(f"the NATS image could not be built: {exc}") from None
    return found


def helm(node: Node, *args: str, timeout: float = 300) -> str:
    """``helm <args>`` against the node's API server as its admin."""
    command = [str(helm_binary()), *args, "--kubeconfig", str(node.control_plane.kubeconfig)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout)
    if done.returncode != 0:
        raise ReleaseError(f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _split(image: str) -> dict[str, str]:
    repository, _, tag = image.rpartition(":")
    return {"repository": repository, "tag": tag}


def user_values(images: Mapping[str, str]) -> dict[str, Any]:
    """What a user writes: where the images are, never pull, and where NATS is."""
    values: dict[str, Any] = {"global": {"arcflow": {"natsUrl": NATS_URL}}}
    for name in SERVICES:
        values[name] = {"image": {**_split(images[name]), "pullPolicy": "Never"}}
    values["reconciler"]["listener"] = {"image": _split(images["listener"])}
    return values


def install(node: Node, images: Mapping[str, str], folder: Path) -> None:
    """``helm install`` of the umbrella chart (CRDs included) into :data:`NAMESPACE` with
    :func:`user_values`, then NATS there (it reads the users' passwords from the Secrets the
    release just made)."""
    folder.mkdir(parents=True, exist_ok=True)
    values = folder / "values.yaml"
    values.write_text(yaml.safe_dump(user_values(images)))
    chart = charts_dir().parents[1] / UMBRELLA_CHART
    helm(node, "install", RELEASE, str(chart), "-n", NAMESPACE, "--create-namespace",
         "-f", str(values))  # fmt: skip
    for manifest in node_nats.manifests(images["nats"]):
        node.control_plane.request("POST", _collection(manifest), manifest)


def _collection(manifest: Mapping[str, Any]) -> str:
    version = str(manifest["apiVersion"])
    group = "/api/v1" if version == "v1" else f"/apis/{version}"
    return f"{group}/namespaces/{NAMESPACE}/{str(manifest['kind']).lower()}s"


def pods(node: Node, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    found = node.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    return list(found.get("items", []))


def role(pod: Mapping[str, Any]) -> str:
    """The charts' component label (watcher, registrar, reconciler), else the name (nats)."""
    labels = pod["metadata"].get("labels", {})
    return str(labels.get("app.kubernetes.io/component") or labels.get("app.kubernetes.io/name"))


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def ready_pods(node: Node) -> dict[str, dict[str, Any]]:
    """The release's live pods by role, Ready or not."""
    return {role(pod): pod for pod in pods(node) if not pod["metadata"].get("deletionTimestamp")}


def wait_ready(node: Node, names: tuple[str, ...], within: float) -> dict[str, dict[str, Any]]:
    """Wait until a pod of each role in ``names`` is Ready; :class:`ReleaseError` naming the
    ones that are not, with their states, after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = {name: pod for name, pod in ready_pods(node).items() if name in names}
        waiting = [name for name in names if name not in found or not ready(found[name])]
        if not waiting:
            return found
        if time.monotonic() > deadline:
            states = {
                name: found[name].get("status", {}).get("containerStatuses")
                for name in waiting
                if name in found
            }
            raise ReleaseError(f"not Ready within {within:.0f}s: {waiting} {states}")
        time.sleep(0.5)


def secret_value(node: Node, namespace: str, name: str, key: str) -> str:
    data = node.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    return base64.b64decode(data["data"][key]).decode()


def auditor_credentials(node: Node) -> tuple[str, str]:
    """The auditor's NATS user and password from the release's Secret, as docs/deploy.md
    tells users."""
    secret = f"{RELEASE}-nats-auditor"
    return (
        secret_value(node, NAMESPACE, secret, "user"),
        secret_value(node, NAMESPACE, secret, "password"),
    )


def runner_template(image: str, memory: str = "64Mi", cpu: str = "10m") -> dict[str, Any]:
    """A runner pod template a user writes for the runner image: non-root, read-only root."""
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "runner", "image": image, "imagePullPolicy": "Never",
        "command": ["/home/runner/run.sh"],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": cpu, "memory": "32Mi"},
                      "limits": {"memory": memory}},
    }]}}  # fmt: skip


__all__ = [
    "IMAGE_NAMES",
    "NAMESPACE",
    "NATS_URL",
    "RELEASE",
    "SERVICES",
    "ReleaseError",
    "auditor_credentials",
    "build_images",
    "charts_dir",
    "helm",
    "install",
    "pods",
    "ready",
    "ready_pods",
    "role",
    "runner_template",
    "secret_value",
    "user_values",
    "wait_ready",
]
