"""``ARCFLOW_RECONCILER_LISTENER_NATS_*`` -> BuildSettings, and the URL default."""

from __future__ import annotations

import pytest

from arcflow.reconciler.settings import ReconcilerSettings


def test_unset_url_defaults_to_the_reconcilers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://nats.nats.svc:4222")
    monkeypatch.delenv("ARCFLOW_RECONCILER_LISTENER_NATS_URL", raising=False)
    build = ReconcilerSettings().build_settings()
    assert build.listener_nats_url == "nats://nats.nats.svc:4222"


def test_empty_url_turns_the_wiring_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://nats.nats.svc:4222")
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_URL", "")
    assert ReconcilerSettings().build_settings().listener_nats_url == ""


def test_no_url_anywhere_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCFLOW_NATS_URL", raising=False)
    monkeypatch.delenv("ARCFLOW_RECONCILER_LISTENER_NATS_URL", raising=False)
    assert ReconcilerSettings().build_settings().listener_nats_url == ""


def test_env_reaches_build_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_URL", "tls://nats-listeners:4222")
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_SECRET", "listener-nats")
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_AUTH", "credsFile")
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_TLS_SECRET", "nats-ca")
    build = ReconcilerSettings().build_settings()
    assert (
        build.listener_nats_url,
        build.listener_nats_secret,
        build.listener_nats_auth,
        build.listener_nats_tls_secret,
    ) == ("tls://nats-listeners:4222", "listener-nats", "credsFile", "nats-ca")


def test_secret_without_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_URL", "")
    monkeypatch.setenv("ARCFLOW_RECONCILER_LISTENER_NATS_SECRET", "listener-nats")
    with pytest.raises(ValueError, match="listener_nats_secret needs listener_nats_url"):
        ReconcilerSettings().build_settings()
