"""NATS settings from the environment, and authenticated connections to a real server."""

from __future__ import annotations

import logging

import nats
import nats.errors
import pytest

from arcflow.common.nats import NatsSettings, NatsSettingsError, jetstream_of, make_broker
from arcflow.common.nats.settings import (
    FASTSTREAM_LOGGER,
    service_inbox_prefix,
    validate_inbox_prefix,
)
from arcflow.devstack.nats_server import NatsServer


def test_settings_read_the_environment_and_hide_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_URL", "nats://a:4222, nats://b:4222")
    monkeypatch.setenv("ARCFLOW_NATS_USER", "reconciler")
    monkeypatch.setenv("ARCFLOW_NATS_PASSWORD", "s3cr3t-pw")
    monkeypatch.setenv("ARCFLOW_NATS_NAME", "reconciler-0")
    settings = NatsSettings()
    assert settings.servers == ["nats://a:4222", "nats://b:4222"]
    assert "s3cr3t-pw" not in repr(settings)
    assert "s3cr3t-pw" not in str(settings.model_dump())
    options = settings.connect_options("reconciler")
    assert options["user"] == "reconciler"
    assert options["password"] == "s3cr3t-pw"
    assert options["name"] == "reconciler-0"
    assert "tls" not in options
    assert options["inbox_prefix"] == "_INBOX_reconciler"


@pytest.mark.parametrize("service", ["watcher", "registrar", "reconciler", "listener", "auditor"])
def test_each_identity_gets_its_own_inbox_prefix_by_default(service: str) -> None:
    settings = NatsSettings()
    assert settings.inbox_prefix is None
    assert settings.connect_options(service)["inbox_prefix"] == f"_INBOX_{service}"
    assert service_inbox_prefix(service) == f"_INBOX_{service}"


def test_the_environment_overrides_the_inbox_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_INBOX_PREFIX", "_INBOX_team1.reconciler")
    settings = NatsSettings()
    assert settings.inbox_prefix == "_INBOX_team1.reconciler"
    assert settings.connect_options("reconciler")["inbox_prefix"] == "_INBOX_team1.reconciler"
    assert settings.inbox_prefix_for("listener") == "_INBOX_team1.reconciler"


@pytest.mark.parametrize(
    "prefix", ["", "_INBOX.>", "_INBOX_*", "_INBOX.", ".x", "a..b", "my inbox", "a\tb", ">"]
)
def test_an_invalid_inbox_prefix_is_rejected_with_the_reason(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="inbox prefix"):
        NatsSettings(inbox_prefix=prefix)
    monkeypatch.setenv("ARCFLOW_NATS_INBOX_PREFIX", prefix)
    with pytest.raises(ValueError, match="inbox prefix"):
        NatsSettings()


@pytest.mark.parametrize("prefix", ["_INBOX_x", "_INBOX.svc", "a.b-c.d_e"])
def test_a_valid_inbox_prefix_is_kept(prefix: str) -> None:
    assert validate_inbox_prefix(prefix) == prefix
    assert NatsSettings(inbox_prefix=prefix).connect_options("x")["inbox_prefix"] == prefix


@pytest.mark.parametrize("service", ["", "a.b", "*", ">", "has space"])
def test_a_service_identity_must_be_one_token(service: str) -> None:
    with pytest.raises(ValueError, match="one subject token"):
        NatsSettings().connect_options(service)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tls_cert": "/c.pem"}, "tls_cert and tls_key"),
        ({"creds_file": "/x.creds", "user": "u"}, "either creds_file"),
        ({"password": "p"}, "without user"),
    ],
)
def test_inconsistent_settings_are_rejected(kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(NatsSettingsError, match=match):
        NatsSettings(**kwargs).connect_options("watcher")  # type: ignore[arg-type]


def test_empty_url_is_rejected() -> None:
    with pytest.raises(ValueError, match="at least one server"):
        NatsSettings(url=" , ")


def test_tls_scheme_builds_a_context_and_creds_file_is_passed() -> None:
    options = NatsSettings(url="tls://nats:4222", creds_file="/etc/nats/svc.creds").connect_options(
        "watcher"
    )
    assert options["tls"] is not None
    assert options["user_credentials"] == "/etc/nats/svc.creds"


@pytest.mark.integration
async def test_user_password_authenticate_with_nats_py_and_faststream() -> None:
    with NatsServer(extra_args=["--user", "svc", "--pass", "pw-123"]) as server:
        good = NatsSettings(url=server.url, user="svc", password="pw-123")
        nc = await nats.connect(**good.connect_options("svc"))
        try:
            assert nc.is_connected
        finally:
            await nc.close()
        broker = make_broker(good, "svc")
        async with broker:
            await broker.connect()
            info = await jetstream_of(broker).account_info()
            assert info is not None
        bad = NatsSettings(url=server.url, user="svc", password="wrong", max_reconnect_attempts=0)
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(**bad.connect_options("svc"), allow_reconnect=False)


def test_faststreams_echo_of_a_connection_outage_is_dropped_and_other_errors_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server restart is reported once by the connection's own callbacks; FastStream's
    "Connection broken" warning with a traceback for the same outage (logged or not, by
    timing) is dropped. A different error still reaches the log with its traceback."""
    make_broker(NatsSettings(url="nats://127.0.0.1:1"), "registrar")
    logger = logging.getLogger(FASTSTREAM_LOGGER)
    caplog.set_level(logging.WARNING, logger=FASTSTREAM_LOGGER)
    for outage in (nats.errors.UnexpectedEOF(), nats.errors.ConnectionClosedError(), OSError()):
        logger.warning(f"Connection broken with {outage!r}", exc_info=outage)
    other = nats.errors.AuthorizationError()
    logger.warning(f"Connection broken with {other!r}", exc_info=other)
    logger.warning("Task supervisor restarted a loop", exc_info=nats.errors.UnexpectedEOF())
    kept = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert kept == [
        (f"Connection broken with {other!r}", True),
        ("Task supervisor restarted a loop", True),
    ]
