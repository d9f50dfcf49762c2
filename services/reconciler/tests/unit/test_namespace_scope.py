"""ARCFLOW_RECONCILER_NAMESPACES: parsed like the watcher's, and what the cache then lists and
watches where (a namespace-scoped install: nothing cluster-wide)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arcflow.common.cache import ObjectCache
from arcflow.reconciler.cache import CACHED_KINDS, cached_kinds
from arcflow.reconciler.settings import ReconcilerSettings


def test_env_namespaces_are_split_sorted_and_deduplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_RECONCILER_NAMESPACES", " team-b,team-a,, team-b ")
    assert ReconcilerSettings().namespaces == ["team-a", "team-b"]
    monkeypatch.setenv("ARCFLOW_RECONCILER_NAMESPACES", "")
    assert ReconcilerSettings().namespaces == []


@pytest.mark.parametrize("value", ["Team-A", "-x", "a" * 64, "a_b"])
def test_a_bad_namespace_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("ARCFLOW_RECONCILER_NAMESPACES", f"ok,{value}")
    with pytest.raises(ValidationError, match="not a valid namespace name"):
        ReconcilerSettings()


def test_no_namespaces_caches_every_kind_cluster_wide() -> None:
    assert cached_kinds([], "arc-sys") == CACHED_KINDS
    assert all(kind.namespaces == () for kind in CACHED_KINDS)


def test_each_kind_is_watched_where_it_lives() -> None:
    scoped = {k.resource.kind: k.namespaces for k in cached_kinds(["team-b", "team-a"], "arc-sys")}
    managed, both = ("team-a", "team-b"), ("arc-sys", "team-a", "team-b")
    assert scoped == {
        # the sets, their runners and the listener's Role/RoleBinding: the ARS namespace
        "AutoscalingRunnerSet": managed,
        "EphemeralRunnerSet": managed,
        "EphemeralRunner": managed,
        "Role": managed,
        "RoleBinding": managed,
        "ResourceQuota": managed,  # capacity.fromResourceQuota reads the set's namespace
        # listeners and their ServiceAccounts: the controller namespace
        "AutoscalingListener": ("arc-sys",),
        "ServiceAccount": ("arc-sys",),
        # runner and listener pods, JIT and listener config Secrets: both
        "Pod": both,
        "Secret": both,
    }
    # selectors kept: pods and Secrets are still only arcflow's own
    selectors = {k.resource.kind: k.label_selector for k in CACHED_KINDS}
    assert {
        k.resource.kind: k.label_selector for k in cached_kinds(["team-a"], "arc-sys")
    } == selectors


def test_a_controller_namespace_that_is_also_managed_is_watched_once() -> None:
    kinds = cached_kinds(["arc-sys"], "arc-sys")
    assert {k.namespaces for k in kinds} == {("arc-sys",)}


def test_the_scoped_cache_has_one_informer_per_kind_and_namespace() -> None:
    cache = ObjectCache(
        None,  # type: ignore[arg-type]  # nothing is started: only the plan is checked
        cached_kinds(["team-a"], "arc-sys"),
        relist_seconds=0,
    )
    assert all(informer.namespace for informer in cache.informers.values())
    assert sorted(cache.informers) == sorted(
        [
            "AutoscalingRunnerSet/team-a",
            "EphemeralRunnerSet/team-a",
            "EphemeralRunner/team-a",
            "AutoscalingListener/arc-sys",
            "Pod/arc-sys",
            "Pod/team-a",
            "Secret/arc-sys",
            "Secret/team-a",
            "ServiceAccount/arc-sys",
            "Role/team-a",
            "RoleBinding/team-a",
            "ResourceQuota/team-a",
        ]
    )
