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


def _injected_token_volume(item: Any) -> bool:
    return isinstance(item, dict) and str(item.get("name", "")).startswith("kube-api-access-")


def assert_written(live: Any, want: Any, where: str) -> None:
    """``live`` (an object as the API server returns it) holds everything of ``want`` (what
    arcflow wrote). A real server adds its defaults (a Secret's ``type: Opaque``, a pod's
    ``dnsPolicy``, a container's ``terminationMessagePath``) and the ServiceAccount admission
    plugin adds the token volume and its mounts (``kube-api-access-*``); nothing else may
    differ. The failure names the path of the first difference."""
    if isinstance(want, dict):
        assert isinstance(live, dict), f"{where}: {live!r} is not an object"
        for key, value in want.items():
            assert key in live, f"{where}.{key} is missing"
            assert_written(live[key], value, f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(live, list), f"{where}: {live!r} is not a list"
        live = [item for item in live if not _injected_token_volume(item)]
        assert len(live) == len(want), f"{where}: {live!r} != {want!r}"
        for index, (got, expected) in enumerate(zip(live, want, strict=True)):
            assert_written(got, expected, f"{where}[{index}]")
    else:
        assert live == want, f"{where}: {live!r} != {want!r}"
