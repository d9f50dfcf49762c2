"""A stateful Kubernetes API server emulator for tests and the dev stack (see server.py)."""

from arcflow.devstack.kube_emulator.server import KubeEmulator, RecordedRequest
from arcflow.devstack.kube_emulator.status import ApiStatus
from arcflow.devstack.kube_emulator.store import ObjectStore

__all__ = ["ApiStatus", "KubeEmulator", "ObjectStore", "RecordedRequest"]
