"""The GitHub server connection of an ARS: proxy routing, no secret in a repr, CA checks."""

from __future__ import annotations

import httpx
import pytest
from httpx._utils import URLPattern

from arcflow.common.actions.connection import ServerConnection, no_proxy_pattern
from arcflow.common.actions.tls import CABundleError, ca_bundle_from_config_map
from arcflow.devstack.actions_sim.tls import private_chain

TLS = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "ca.crt"}}}


@pytest.mark.parametrize(
    ("entry", "url", "direct"),
    [
        ("example.com", "https://example.com/x", True),
        ("example.com", "https://api.example.com/x", True),
        (".example.com", "https://api.example.com/x", True),
        ("example.com", "https://notexample.com/x", False),
        ("10.0.0.5", "http://10.0.0.5:8080/", True),
        ("10.0.0.5:8080", "http://10.0.0.5:9090/", False),
        ("[::1]:8443", "https://[::1]:8443/", True),
        ("localhost", "http://localhost:1/", True),
    ],
)
def test_no_proxy_entries_match_like_go(entry: str, url: str, direct: bool) -> None:
    assert URLPattern(no_proxy_pattern(entry)).matches(httpx.URL(url)) is direct


def test_a_cidr_entry_is_ignored() -> None:
    assert no_proxy_pattern("10.0.0.0/8") == ""


def test_proxy_credentials_never_print_and_routes_per_scheme() -> None:
    connection = ServerConnection(
        http_proxy="http://u:s3cr%40t@proxy:3128",
        https_proxy="http://u:s3cr%40t@proxy:3129",
        no_proxy=("example.com",),
    )
    assert "s3cr" not in repr(connection)
    assert "s3cr" not in connection.fingerprint()
    assert set(connection.proxy_passwords()) == {"s3cr%40t", "s3cr@t"}
    mounts = connection.proxy_mounts(True)
    assert set(mounts) == {"http://", "https://", "all://*example.com"}
    assert mounts["all://*example.com"] is None
    assert ServerConnection(https_proxy="http://p:1", no_proxy=("*",)).proxy_mounts(True) == {}
    assert ServerConnection().fingerprint() != connection.fingerprint()


@pytest.mark.parametrize(
    ("config_map", "message"),
    [
        (None, "ConfigMap ns/ca (spec.githubServerTLS) not found"),
        ({"data": {}}, "ConfigMap ns/ca (spec.githubServerTLS) has no key 'ca.crt'"),
        ({"data": {"ca.crt": "nope"}}, "key 'ca.crt' (spec.githubServerTLS) is not a PEM"),
    ],
)
def test_an_unusable_ca_says_what_is_wrong(config_map: dict | None, message: str) -> None:
    with pytest.raises(CABundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ca_bundle_from_config_map(config_map, "ns", TLS)


def test_an_intermediate_is_a_usable_ca() -> None:
    pem = private_chain().intermediate.pem
    assert ca_bundle_from_config_map({"data": {"ca.crt": pem}}, "ns", TLS) == pem
