"""The RBAC tests' side of :mod:`arcflow.devstack.identities` (where the identities live, so
the stack factory can run each service as its own ServiceAccount too): that module's names,
plus the skip for a backend that cannot prove RBAC."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcflow.devstack.control_plane import ControlPlane
from arcflow.devstack.identities import (
    CHART_SERVICES,
    CLUSTER_ROLE,
    CLUSTER_ROLE_BINDING,
    IDENTITY_KINDS,
    LISTENER,
    RBAC_GROUP,
    REGISTRY,
    SELF_SUBJECT_ACCESS_REVIEW,
    Identity,
    IdentityError,
    KubeIdentities,
    Manifest,
    access_allowed,
    chart_values,
    helm_binary,
    listener_bundle,
    render_identities,
)
from tests.fixtures.kube import APISERVER, backend, real_kubeconfig


def require_rbac_server() -> None:
    """Skip, saying why, unless the session's kube backend is this repository's own control
    plane: the emulator authorizes everything, and a cluster of yours has no TokenRequest
    admin here."""
    if real_kubeconfig() or backend() != APISERVER:
        pytest.skip("RBAC is proven on the session's own kube-apiserver only")


def open_identities(request: pytest.FixtureRequest, folder: Path) -> KubeIdentities:
    """For a fixture: ``KubeIdentities`` on the session's control plane, or a skip (before the
    control plane is asked for) when the backend cannot prove RBAC."""
    require_rbac_server()
    plane: ControlPlane = request.getfixturevalue("control_plane")
    return KubeIdentities(plane, folder)


__all__ = [
    "CHART_SERVICES",
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "IDENTITY_KINDS",
    "LISTENER",
    "RBAC_GROUP",
    "REGISTRY",
    "SELF_SUBJECT_ACCESS_REVIEW",
    "Identity",
    "IdentityError",
    "KubeIdentities",
    "Manifest",
    "access_allowed",
    "chart_values",
    "helm_binary",
    "listener_bundle",
    "open_identities",
    "render_identities",
    "require_rbac_server",
]
