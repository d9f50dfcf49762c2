"""``capacity.fromResourceQuota`` on the real control plane (ADR 0062): the set's budget
follows the ResourceQuota of its namespace, read from the reconciler's watch-fed cache; a set
without the flag is not touched by a quota."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from arcflow.common.constants import ANNOTATION_LISTENER_CAPACITY
from arcflow.common.kube import RESOURCE_QUOTA
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration


def _quota(namespace: str, hard: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "runners", "namespace": namespace},
        "spec": {"hard": hard},
    }


async def _capacity(stack: Stack, ars: str) -> dict[str, Any] | None:
    """The capacity annotation of the set's listener, ``None`` without listener or annotation."""
    for al in await stack.list("AutoscalingListener", stack.controller_namespace):
        if al["spec"]["autoscalingRunnerSetName"] == ars:
            raw = (al["metadata"].get("annotations") or {}).get(ANNOTATION_LISTENER_CAPACITY)
            return None if raw is None else dict(json.loads(raw))
    return None


async def _configs(stack: Stack) -> list[dict[str, Any]]:
    """The ``capacity`` key of every listener ``config.json`` in the controller namespace."""
    found = []
    for secret in await stack.list("Secret", stack.controller_namespace):
        raw = (secret.get("data") or {}).get("config.json")
        if raw:
            found.append(json.loads(base64.b64decode(raw)).get("capacity") or {})
    return found


async def _budget_is(stack: Stack, ars: str, cpu: str, max_runners: int) -> None:
    def wanted(capacity: dict[str, Any] | None) -> bool:
        return (
            capacity is not None
            and capacity.get("resources") == {"cpu": cpu}
            and capacity.get("maxRunners") == max_runners
        )

    async def check() -> bool:  # the annotation and the listener's config.json
        return wanted(await _capacity(stack, ars)) and any(map(wanted, await _configs(stack)))

    await eventually(check, within=30, what=f"listener capacity of {ars}: cpu {cpu}, {max_runners}")


async def test_the_budget_follows_the_namespace_quota(stack: Stack) -> None:
    ns = stack.namespace
    await stack.kube.create(_quota(ns, {"requests.cpu": "4", "pods": "3"}))
    await stack.register("quota", "", 31)
    await stack.register("plain", "", 32)
    await stack.apply_ars(ars_manifest(ns, "quota", capacity={"fromResourceQuota": True}))
    await stack.apply_ars(ars_manifest(ns, "plain", capacity={"maxRunners": 5}))

    await _budget_is(stack, "quota", "4", 3)

    async def plain_listener() -> dict[str, Any] | None:
        return await _capacity(stack, "plain")

    plain = await eventually(plain_listener, what="listener of the set without the flag")
    assert plain.get("maxRunners") == 5
    assert "resources" not in plain

    # The quota changes: only the watch tells the reconciler (no ARS change is published).
    await stack.kube.patch_merge(
        RESOURCE_QUOTA,
        "runners",
        {"spec": {"hard": {"requests.cpu": "6", "pods": "2"}}},
        namespace=ns,
    )
    await _budget_is(stack, "quota", "6", 2)
    assert await _capacity(stack, "plain") == plain  # without the flag nothing changes


async def test_a_budget_from_quotas_without_a_quota_says_so_until_one_appears(
    stack: Stack,
) -> None:
    """Issue 33: ``fromResourceQuota`` in a namespace with no ResourceQuota changes nothing
    (docs/models.md), and the set says so: ``ResourceQuotaFound=False`` (``NoResourceQuota``)
    with a Warning Event; a quota created later turns it True with a Normal Event."""
    ns = stack.namespace
    await stack.register("open", "", 33)
    await stack.apply_ars(ars_manifest(ns, "open", capacity={"fromResourceQuota": True}))

    async def condition() -> dict[str, Any] | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "open", ns)
        conditions = (ars.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "ResourceQuotaFound"), None)

    missing = await eventually(condition, within=30, what="the ResourceQuotaFound condition")
    assert (missing["status"], missing["reason"]) == ("False", "NoResourceQuota")
    assert f'namespace "{ns}" has no ResourceQuota' in missing["message"]
    assert "unbounded" in missing["message"]
    warned = await stack.events("NoResourceQuota", "open")
    assert [e["type"] for e in warned] == ["Warning"]
    assert ((await _capacity(stack, "open")) or {}).get("maxRunners") is None  # unbounded

    await stack.kube.create(_quota(ns, {"pods": "2"}))

    async def found() -> dict[str, Any] | None:
        now = await condition()
        return now if now is not None and now["status"] == "True" else None

    turned = await eventually(found, within=30, what="ResourceQuotaFound turning True")
    assert turned["reason"] == "ResourceQuotaFound"
    assert [e["type"] for e in await stack.events("ResourceQuotaFound", "open")] == ["Normal"]
    await _budget_is_runners(stack, "open", 2)
    await stack.wait_idle()
    assert len(await stack.events("NoResourceQuota", "open")) == 1  # said once


async def _budget_is_runners(stack: Stack, ars: str, max_runners: int) -> None:
    async def check() -> bool:
        capacity = await _capacity(stack, ars)
        return capacity is not None and capacity.get("maxRunners") == max_runners

    await eventually(check, within=30, what=f"listener capacity of {ars}: {max_runners} runners")
