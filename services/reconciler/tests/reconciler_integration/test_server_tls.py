"""A CA ConfigMap (githubServerTLS) that is missing or unusable is explained on the ARS
(condition and Event, ADR 0038), another ARS is unaffected, and fixing it clears both."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from arcflow.devstack.actions_sim.tls import private_chain
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

TLS = {"certificateFrom": {"configMapKeyRef": {"name": "ghes-ca", "key": "ca.crt"}}}


async def _condition(stack: Stack, name: str) -> dict[str, Any] | None:
    ars = await stack.kube.get("AutoscalingRunnerSet", name, stack.namespace)
    for condition in (ars.get("status") or {}).get("conditions") or []:
        if condition["type"] == "GitHubServerTLSValid":
            return dict(condition)
    return None


async def _running(stack: Stack, name: str) -> bool:
    ars = await stack.kube.get("AutoscalingRunnerSet", name, stack.namespace)
    return (ars.get("status") or {}).get("phase") == "Running"


async def test_a_missing_then_invalid_then_fixed_ca_is_explained(stack: Stack) -> None:
    await stack.register("ghes", "", 7)
    await stack.register("plain", "", 8)
    await stack.apply_ars(ars_manifest(stack.namespace, "ghes", githubServerTLS=TLS))
    await stack.apply_ars(ars_manifest(stack.namespace, "plain"))

    async def missing() -> bool:
        condition = await _condition(stack, "ghes")
        assert condition is not None
        assert condition["status"] == "False"
        assert "ConfigMap" in condition["message"]
        assert "ghes-ca (spec.githubServerTLS) not found" in condition["message"]
        return True

    await eventually(missing, what="GitHubServerTLSValid=False")
    assert await stack.events("CACertificateUnusable", "ghes")
    await eventually(lambda: _running(stack, "plain"), what="the other ARS runs")

    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ghes-ca", "namespace": stack.namespace},
            "data": {"ca.crt": "not a certificate"},
        }
    )
    # The CA ConfigMap is not watched (by the reconciler nor the watcher): the periodic
    # resync is what notices a change to it.
    await stack.app.resync()

    async def invalid() -> bool:
        condition = await _condition(stack, "ghes")
        assert condition is not None
        assert "is not a PEM certificate bundle" in condition["message"]
        return True

    await eventually(invalid, what="the invalid CA explained")

    pem = private_chain().intermediate.pem
    await stack.kube.patch_merge(
        "ConfigMap", "ghes-ca", {"data": {"ca.crt": pem}}, namespace=stack.namespace
    )
    await stack.app.resync()

    async def fixed() -> bool:
        condition = await _condition(stack, "ghes")
        assert condition is not None
        assert condition["status"] == "True", condition
        return True

    await eventually(fixed, what="GitHubServerTLSValid=True")
    assert await stack.events("CACertificateFound", "ghes")

    async def config_has_ca() -> bool:
        for secret in await stack.list("Secret", stack.controller_namespace):
            raw = (secret.get("data") or {}).get("config.json")
            if raw and json.loads(base64.b64decode(raw)).get("server_root_ca") == pem:
                return True
        return False

    await eventually(config_has_ca, what="the listener config carries the CA")
