"""Credential fingerprints, Secret decoding, the client cache and event routing: pure, no servers.

Record keys and the RPC models moved to ``arcflow.common`` (tests in ``libs/common/tests/rpc``).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest

from arcflow.common.actions.connection import ServerConnection
from arcflow.common.events import K8sChange, K8sObjectChanged
from arcflow.registrar.credentials import (
    ActionsClientCache,
    CredentialsUnavailableError,
    credentials_fingerprint,
    decode_secret_data,
    parse_credentials,
)
from arcflow.registrar.k8s_changes import ars_of_event

TOKEN = "ghp_" + "S" * 36


def test_fingerprint_is_a_digest_that_tracks_rotation() -> None:
    one = credentials_fingerprint({"github_token": TOKEN.encode(), "other": b"x"})
    assert TOKEN not in one
    assert len(one) == 64
    assert one == credentials_fingerprint({"github_token": TOKEN.encode()})
    assert one != credentials_fingerprint({"github_token": (TOKEN + "2").encode()})


def _secret(data: dict[str, Any]) -> dict[str, Any]:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_secret_decoding_and_errors_never_show_values() -> None:
    assert decode_secret_data(_secret({"github_token": TOKEN}), "ns/s") == {
        "github_token": TOKEN.encode()
    }
    with pytest.raises(CredentialsUnavailableError, match="github_token is not valid base64"):
        decode_secret_data({"data": {"github_token": TOKEN + "!"}}, "ns/s")
    with pytest.raises(CredentialsUnavailableError) as caught:
        parse_credentials({"github_token": TOKEN.encode(), "github_app_id": b"1"}, "ns/s")
    assert TOKEN not in str(caught.value)
    with pytest.raises(CredentialsUnavailableError, match="no credentials"):
        parse_credentials({}, "ns/s")


async def test_client_cache_reuses_per_fingerprint_and_url_and_evicts() -> None:
    built: list[tuple[str, Any]] = []
    closed: list[str] = []

    class FakeClient:
        def __init__(self, url: str) -> None:
            self.url = url

        async def aclose(self) -> None:
            closed.append(self.url)

    def factory(url: str, creds: Any, connection: ServerConnection) -> Any:
        built.append((url, creds))
        return FakeClient(url)

    cache = ActionsClientCache(factory, max_size=2)
    data = {"github_token": TOKEN.encode()}
    a = await cache.client_for("https://github.com/a", data, "ns/s")
    assert await cache.client_for("https://github.com/a/", data, "ns/s") is a
    await cache.client_for("https://github.com/b", data, "ns/s")
    rotated = {"github_token": (TOKEN + "x").encode()}
    await cache.client_for("https://github.com/a", rotated, "ns/s")
    assert len(built) == 3
    assert closed == ["https://github.com/a"]
    assert TOKEN not in repr(built[0][1])
    # Another CA or proxy for the same credentials and URL is another client.
    with_ca = ServerConnection(root_ca_pem="-----BEGIN CERTIFICATE-----")
    assert await cache.client_for("https://github.com/a", data, "ns/s", with_ca) is not a
    assert len(built) == 4
    await cache.aclose()
    assert len(closed) == 4


def _change(resource: str, change: K8sChange = "MODIFIED", **kw: Any) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="t",
        api_version="actions.github.com/v1alpha1",
        kind="X",
        resource=resource,
        namespace="ns",
        name=kw.pop("name", "obj"),
        uid="u",
        change=change,
        resource_version="1",
        **kw,
    )


def test_event_routing() -> None:
    assert ars_of_event(_change("autoscalingrunnersets", name="arc")) == ("ns", "arc")
    assert ars_of_event(_change("autoscalingrunnersets", "DELETED", name="arc")) == ("ns", "arc")
    labels = {
        "actions.github.com/scale-set-name": "arc",
        "actions.github.com/scale-set-namespace": "ns",
    }
    assert ars_of_event(_change("ephemeralrunnersets", labels=labels)) is None
    assert ars_of_event(_change("ephemeralrunnersets", "DELETED", labels=labels)) == ("ns", "arc")
    assert ars_of_event(
        _change("ephemeralrunnersets", labels=labels, deletion_timestamp=datetime.now(UTC))
    ) == ("ns", "arc")
    assert ars_of_event(_change("ephemeralrunnersets", "DELETED")) is None
    assert ars_of_event(_change("pods", "DELETED", labels=labels)) is None


def test_newest_version_of_coalesced_events() -> None:
    from arcflow.registrar.ars_reads import newest_version

    assert newest_version("12", "9") == "12"
    assert newest_version("9", "12") == "12"
    assert newest_version("", "12") == ""  # an event without a version: read over HTTP
    assert newest_version("12", "abc") == ""


def test_hints_of_a_waiting_key_merge_and_a_failed_pass_puts_its_own_back() -> None:
    from arcflow.registrar.hints import Hint, PassHints

    hints = PassHints()
    key = ("ns", "arc")
    assert hints.take(key) == Hint()  # a retry without triggers: read the ARS over HTTP
    hints.note(key, Hint("7", trigger="autoscalingrunnersets"))
    hints.note(key, Hint("9", verify=True, trigger="sweep"))
    taken = hints.take(key)
    assert taken == Hint("9", verify=True, trigger="autoscalingrunnersets")
    assert len(hints) == 0
    hints.note(key, Hint("12", trigger="autoscalingrunnersets"))  # arrived during the pass
    hints.put_back(key, taken)  # the pass failed: its retry answers for both
    assert hints.take(key) == Hint("12", verify=True, trigger="autoscalingrunnersets")
    hints.note(key, Hint("", trigger="ephemeralrunnersets"))
    hints.note(key, Hint("12", trigger="sweep"))
    assert hints.take(key).seen_version == ""  # one trigger without a version: over HTTP
