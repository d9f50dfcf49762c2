"""ARCFLOW_REGISTRAR_NAMESPACES: parsed like the watcher's; the ARS cache then lists and
watches each of those namespaces, never the whole cluster."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arcflow.common.cache import ObjectCache
from arcflow.registrar.lookup import ars_cached_kind
from arcflow.registrar.settings import RegistrarSettings


def test_env_namespaces_are_split_sorted_and_deduplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_REGISTRAR_NAMESPACES", "team-b, team-a,team-a")
    assert RegistrarSettings().namespaces == ["team-a", "team-b"]
    monkeypatch.delenv("ARCFLOW_REGISTRAR_NAMESPACES")
    assert RegistrarSettings().namespaces == []


def test_a_bad_namespace_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_REGISTRAR_NAMESPACES", "team-a,Team_B")
    with pytest.raises(ValidationError, match="'Team_B' is not a valid namespace name"):
        RegistrarSettings()


def test_the_ars_cache_is_cluster_wide_or_one_watch_per_namespace() -> None:
    assert ars_cached_kind().namespaces == ()
    everywhere = ObjectCache(None, [ars_cached_kind()])  # type: ignore[arg-type]
    assert [i.namespace for i in everywhere.informers.values()] == [None]
    scoped = ObjectCache(None, [ars_cached_kind(["team-b", "team-a"])])  # type: ignore[arg-type]
    assert sorted(scoped.informers) == [
        "AutoscalingRunnerSet/team-a",
        "AutoscalingRunnerSet/team-b",
    ]
    assert sorted(str(i.namespace) for i in scoped.informers.values()) == ["team-a", "team-b"]
