"""Settings from the environment and the scopes they produce."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arcflow.watcher.settings import DEFAULT_OWNED_SELECTOR, WatcherSettings
from arcflow.watcher.watchers import watch_scopes


def test_defaults_watch_everything_cluster_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ARCFLOW_WATCHER_NAMESPACES", "ARCFLOW_WATCHER_POD_LABEL_SELECTOR"):
        monkeypatch.delenv(var, raising=False)
    settings = WatcherSettings()
    scopes = watch_scopes(settings)
    assert [(s.resource.plural, s.namespace, s.label_selector) for s in scopes] == [
        ("autoscalingrunnersets", None, None),
        ("ephemeralrunnersets", None, None),
        ("ephemeralrunners", None, None),
        ("autoscalinglisteners", None, None),
        ("pods", None, DEFAULT_OWNED_SELECTOR),
        ("secrets", None, DEFAULT_OWNED_SELECTOR),
    ]
    assert DEFAULT_OWNED_SELECTOR == "app.kubernetes.io/part-of=gha-runner-scale-set"
    # ADR 0126: Secrets as metadata alone (the watcher never receives their data).
    assert [s.resource.plural for s in scopes if s.metadata_only] == ["secrets"]


def test_env_namespaces_and_selectors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_WATCHER_NAMESPACES", "team-b, team-a,team-b")
    monkeypatch.setenv("ARCFLOW_WATCHER_POD_LABEL_SELECTOR", "actions.github.com/scale-set-name")
    monkeypatch.setenv("ARCFLOW_WATCHER_RESYNC_INTERVAL_SECONDS", "30")
    monkeypatch.setenv("ARCFLOW_WATCHER_HEALTH_PORT", "9000")
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://10.0.0.1:4222")
    settings = WatcherSettings()
    assert settings.namespaces == ["team-a", "team-b"]
    assert settings.resync_interval_seconds == 30
    assert settings.health_port == 9000
    assert settings.nats.servers == ["nats://10.0.0.1:4222"]
    scopes = watch_scopes(settings)
    assert len(scopes) == 12
    pods = [s for s in scopes if s.resource.plural == "pods"]
    assert {s.namespace for s in pods} == {"team-a", "team-b"}
    assert {s.label_selector for s in pods} == {"actions.github.com/scale-set-name"}


@pytest.mark.parametrize(
    ("var", "value", "reason"),
    [
        ("ARCFLOW_WATCHER_NAMESPACES", "Bad_NS", "not a valid namespace"),
        ("ARCFLOW_WATCHER_NAMESPACES", "-x", "not a valid namespace"),
        ("ARCFLOW_WATCHER_SECRET_LABEL_SELECTOR", "a in (b", "unbalanced"),
        ("ARCFLOW_WATCHER_RESYNC_INTERVAL_SECONDS", "-1", "greater than or equal"),
    ],
)
def test_bad_settings_say_why(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError, match=reason):
        WatcherSettings()
