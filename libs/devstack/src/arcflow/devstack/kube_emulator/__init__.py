"""A stateful Kubernetes API server emulator for tests and the dev stack (see server.py)."""

from arcflow.devstack.kube_emulator.server import KubeEmulator, RecordedRequest
from arcflow.devstack.kube_emulator.store import ApiStatus, ObjectStore

__all__ = ["ApiStatus", "KubeEmulator", "ObjectStore", "RecordedRequest"]
