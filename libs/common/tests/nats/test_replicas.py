"""The replicas setting (``ARCFLOW_NATS_REPLICAS``) and what declaring does with it on one
server; the 3-node behaviour is tested against a real cluster in
``libs/devstack/tests/test_nats_cluster.py``."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js import JetStreamContext
from pydantic import ValidationError

from arcflow.common.nats import (
    STREAM_K8S,
    JetStreamLayout,
    KvBucketSpec,
    NatsSettings,
    StreamSpec,
    ensure_bucket,
    ensure_stream,
)
from arcflow.common.nats.jetstream import configured_replicas
from arcflow.devstack.nats_server import NatsServer


def test_replicas_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCFLOW_NATS_REPLICAS", raising=False)
    assert configured_replicas() is None
    assert JetStreamLayout().replicas == 1
    assert NatsSettings().replicas is None
    monkeypatch.setenv("ARCFLOW_NATS_REPLICAS", "3")
    assert configured_replicas() == 3
    assert JetStreamLayout().replicas == 3
    assert NatsSettings().replicas == 3


@pytest.mark.parametrize("bad", ["0", "6", "three"])
def test_replicas_out_of_range_are_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_REPLICAS", bad)
    with pytest.raises(ValueError, match="ARCFLOW_NATS_REPLICAS"):
        configured_replicas()
    with pytest.raises(ValidationError, match="replicas"):
        NatsSettings()


@pytest.fixture
async def js(nats_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    client = await nats.connect(nats_server.url)
    yield client.jetstream()
    await client.close()


def _private_stream() -> StreamSpec:
    token = secrets.token_hex(4)
    return dataclasses.replace(STREAM_K8S, name=f"REPLICAS_{token}", subjects=(f"rep{token}.>",))


@pytest.mark.integration
async def test_without_a_setting_an_existing_stream_is_kept(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARCFLOW_NATS_REPLICAS", raising=False)
    spec = _private_stream()
    await ensure_stream(js, spec)
    assert (await js.stream_info(spec.name)).config.num_replicas == 1
    longer = dataclasses.replace(spec, max_age_seconds=spec.max_age_seconds * 2)
    await ensure_stream(js, longer)  # not told the replicas: no update
    assert (await js.stream_info(spec.name)).config.max_age == spec.max_age_seconds
    monkeypatch.setenv("ARCFLOW_NATS_REPLICAS", "1")
    await ensure_stream(js, longer)  # told: the stream converges
    assert (await js.stream_info(spec.name)).config.max_age == longer.max_age_seconds


@pytest.mark.integration
async def test_bucket_is_created_with_the_configured_replicas(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARCFLOW_NATS_REPLICAS", "1")
    spec = KvBucketSpec(f"replicas_{secrets.token_hex(4)}", "probe")
    await ensure_bucket(js, spec)
    await ensure_bucket(js, spec)  # existing, same replicas: kept
    assert (await js.stream_info(f"KV_{spec.bucket}")).config.num_replicas == 1
