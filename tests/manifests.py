"""Small manifests tests create again and again (pure builders, no I/O)."""

from __future__ import annotations

import base64
from typing import Any


def pat_secret(name: str, namespace: str, token: str) -> dict[str, Any]:
    """The ``githubConfigSecret`` of an AutoscalingRunnerSet that authenticates with a PAT."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"github_token": base64.b64encode(token.encode()).decode()},
    }
