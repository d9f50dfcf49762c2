"""JetStream declarations: idempotent, concurrent-safe, updating; publish de-duplication."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js import JetStreamContext

from arcflow.common import subjects
from arcflow.common.events import K8sObjectChanged, encode_event, parse_event
from arcflow.common.nats import (
    CONSUMERS,
    KV_BUCKETS,
    STREAM_K8S,
    STREAMS,
    ConsumerSpec,
    JetStreamLayout,
    auditor_consumer,
    ensure_jetstream,
    publish_event,
    stream_for_subject,
)
from arcflow.devstack.nats_server import NatsServer


def test_stream_for_subject_covers_every_domain() -> None:
    assert stream_for_subject(subjects.k8s_subject("pods", "a", "b")).name == "ARC_K8S"
    assert stream_for_subject(subjects.jobs_subject("a", "b")).name == "ARC_JOBS"
    assert stream_for_subject(subjects.filter_for("audit", "a")).name == "ARC_AUDIT"
    assert stream_for_subject(subjects.dlq_subject("arc.jobs.a.b._")).name == "ARC_DLQ"
    with pytest.raises(ValueError, match="no arcflow stream"):
        stream_for_subject(subjects.registrar_rpc_subject("jitconfig"))  # never persisted


def test_consumer_specs_bound_redelivery_and_back_off() -> None:
    spec = ConsumerSpec(
        "c", "ARC_K8S", "arc.k8s.>", max_deliver=4, retry_delay_seconds=1, retry_delay_cap_seconds=3
    )
    assert spec.to_config().max_deliver == 5  # one spare delivery to dead-letter after a crash
    assert [spec.retry_delay(n) for n in (1, 2, 3, 4)] == [1, 2, 3, 3]
    with pytest.raises(ValueError, match="durable"):
        ConsumerSpec("a.b", "ARC_K8S", "arc.k8s.>")
    with pytest.raises(ValueError, match="max_deliver"):
        ConsumerSpec("a", "ARC_K8S", "arc.k8s.>", max_deliver=0)
    assert auditor_consumer("cli", subjects.filter_for("audit")).stream == "ARC_AUDIT"


@pytest.fixture
async def js(private_nats_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(private_nats_server.url)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


@pytest.mark.integration
async def test_ensure_jetstream_twice_and_concurrently(js: JetStreamContext) -> None:
    await asyncio.gather(ensure_jetstream(js), ensure_jetstream(js))
    await ensure_jetstream(js)
    for spec in STREAMS:
        info = await js.stream_info(spec.name)
        assert info.config.subjects == list(spec.subjects)
        assert info.config.storage == "file"
        assert info.config.duplicate_window == spec.duplicate_window_seconds
    for consumer in CONSUMERS:
        cinfo = await js.consumer_info(consumer.stream, consumer.durable)
        assert cinfo.config.ack_policy == "explicit"
        assert cinfo.config.max_deliver == consumer.max_deliver + 1
        assert cinfo.config.filter_subject == consumer.filter_subject
    for bucket in KV_BUCKETS:
        kv = await js.key_value(bucket.bucket)
        await kv.put("arc.big._", b"7")
        assert (await kv.get("arc.big._")).value == b"7"


@pytest.mark.integration
async def test_changed_declarations_update_in_place(js: JetStreamContext) -> None:
    await ensure_jetstream(js)
    longer = dataclasses.replace(STREAM_K8S, max_age_seconds=STREAM_K8S.max_age_seconds * 2)
    slower = dataclasses.replace(CONSUMERS[0], ack_wait_seconds=90.0)
    await ensure_jetstream(
        js, JetStreamLayout(streams=[longer], consumers=[slower], buckets=KV_BUCKETS)
    )
    assert (await js.stream_info("ARC_K8S")).config.max_age == longer.max_age_seconds
    assert (await js.consumer_info(slower.stream, slower.durable)).config.ack_wait == 90.0


@pytest.mark.integration
async def test_same_change_published_twice_is_stored_once(js: JetStreamContext) -> None:
    await ensure_jetstream(js, consumers=[])
    subject = subjects.k8s_subject("autoscalingrunnersets", "arc", "big")

    def change(rv: str) -> K8sObjectChanged:
        return K8sObjectChanged(
            source="watcher",
            api_version="actions.github.com/v1alpha1",
            kind="AutoscalingRunnerSet",
            resource="autoscalingrunnersets",
            namespace="arc",
            name="big",
            uid="uid-1",
            change="MODIFIED",
            resource_version=rv,
        )

    first = await publish_event(js, subject, change("10"))
    again = await publish_event(js, subject, change("10"))  # e.g. a watch replay
    newer = await publish_event(js, subject, change("11"))
    assert first is not None
    assert again is not None
    assert newer is not None
    assert not first.duplicate
    assert again.duplicate
    assert again.seq == first.seq
    assert newer.seq == first.seq + 1
    assert (await js.stream_info("ARC_K8S")).state.messages == 2
    stored = await js.get_msg("ARC_K8S", first.seq)
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"].endswith(":10:MODIFIED")
    assert isinstance(parse_event(stored.data or b""), K8sObjectChanged)
    assert encode_event(change("10"))  # sanity: encodes
