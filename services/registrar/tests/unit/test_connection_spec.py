"""What an ARS spec's ``githubServerTLS`` and ``proxy`` make of the Actions client's server
connection, read from the typed spec (issue 32 item 4): which objects are read and what is
built, with the objects given as plain data (no servers)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from arcflow.common.actions.connection import ServerConnection
from arcflow.common.kube import Resource
from arcflow.common.models import AutoscalingRunnerSetSpec
from arcflow.registrar.connection import ServerConnectionError, read_server_connection

PASSWORD = "p@ss/word"


class Objects:
    """The ConfigMaps and Secrets of one namespace, and which were read."""

    def __init__(self, **objects: dict[str, Any]) -> None:
        self.objects = objects
        self.read: list[str] = []

    async def __call__(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        self.read.append(f"{resource.kind}/{namespace}/{name}")
        return self.objects[name]


def spec(**fields: Any) -> AutoscalingRunnerSetSpec:
    return AutoscalingRunnerSetSpec.model_validate(
        {"githubConfigUrl": "https://github.com/o", "githubConfigSecret": "s", **fields}
    )


async def test_no_spec_or_empty_parts_read_nothing() -> None:
    objects = Objects()
    assert await read_server_connection(objects, "ns", None) == ServerConnection()
    empty = spec(githubServerTLS={}, proxy={"http": {}, "noProxy": ["a"]})
    assert await read_server_connection(objects, "ns", empty) == ServerConnection()
    assert objects.read == []


async def test_a_proxy_with_credentials_reads_its_secret_once() -> None:
    data = {"username": "me", "password": PASSWORD}
    secret = {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
    objects = Objects(creds=secret)
    server = {"url": "http://proxy:3128", "credentialSecretRef": "creds"}
    found = await read_server_connection(
        objects, "ns", spec(proxy={"http": server, "https": server, "noProxy": ["a", "b"]})
    )
    assert found.http_proxy == "http://me:p%40ss%2Fword@proxy:3128"
    assert found.https_proxy == found.http_proxy
    assert found.no_proxy == ("a", "b")
    assert objects.read == ["Secret/ns/creds"]


async def test_a_ca_reference_without_a_key_names_the_field() -> None:
    objects = Objects(ca={"data": {}})
    tls = {"certificateFrom": {"configMapKeyRef": {"name": "ca"}}}
    with pytest.raises(ServerConnectionError, match="needs a name and a key"):
        await read_server_connection(objects, "ns", spec(githubServerTLS=tls))
