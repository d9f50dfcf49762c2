"""Standby listener (ADR 0025): the ``listener-replicas`` annotation through the builders."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arcflow.common.builders import BuildError, BuildSettings, plan_objects
from arcflow.common.models import AutoscalingRunnerSet

REPLICAS = "actions.github.com/listener-replicas"
HASH = "actions.github.com/integrity-hash"


def _plan(doc: dict[str, Any], settings: BuildSettings, **ids: int) -> list[dict[str, Any]]:
    return plan_objects(AutoscalingRunnerSet.from_manifest(doc), ids or {"": 7}, settings)


def _annotated(doc: dict[str, Any], value: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["metadata"].setdefault("annotations", {})[REPLICAS] = value
    return out


def _pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "Pod"]


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def test_two_replicas_give_two_listener_pods(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    one = _plan(single_ars_doc, settings)
    two = _plan(_annotated(single_ars_doc, "2"), settings)
    (listener,) = [o for o in two if o["kind"] == "AutoscalingListener"]
    assert listener["metadata"]["annotations"][REPLICAS] == "2"
    first, second = _pods(two)
    (only,) = _pods(one)
    assert first["metadata"]["name"] == only["metadata"]["name"]
    assert second["metadata"]["name"] == only["metadata"]["name"] + "-1"
    assert _env(first)["ARCFLOW_LISTENER_REPLICAS"] == "2"
    assert (_env(first)["ARCFLOW_LISTENER_REPLICA"], _env(second)["ARCFLOW_LISTENER_REPLICA"]) == (
        "0",
        "1",
    )
    assert first["metadata"]["annotations"][HASH] != second["metadata"]["annotations"][HASH]
    # Same config Secret, ServiceAccount and RBAC for both replicas; nothing else changes.
    assert [o for o in one if o["kind"] != "Pod" and o["kind"] != "AutoscalingListener"] == [
        o for o in two if o["kind"] != "Pod" and o["kind"] != "AutoscalingListener"
    ]
    for pod in (first, second):
        assert pod["spec"]["serviceAccountName"] == only["spec"]["serviceAccountName"]
        assert pod["spec"]["volumes"] == only["spec"]["volumes"]


def test_one_replica_or_none_is_the_default_path(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    default = _plan(single_ars_doc, settings)
    explicit_one = _plan(_annotated(single_ars_doc, "1"), settings)
    assert [o for o in explicit_one if o["kind"] != "AutoscalingRunnerSet"] == default
    assert all("ARCFLOW_LISTENER_REPLICA" not in _env(p) for p in _pods(default))
    assert all(REPLICAS not in (o["metadata"].get("annotations") or {}) for o in default)


@pytest.mark.parametrize("value", ["3", "0", "two", ""])
def test_a_bad_replica_count_is_a_clear_build_error(
    single_ars_doc: dict[str, Any], settings: BuildSettings, value: str
) -> None:
    with pytest.raises(BuildError, match=f"{REPLICAS} must be 1 or 2"):
        _plan(_annotated(single_ars_doc, value), settings)
