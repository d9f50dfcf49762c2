"""Poison messages on every subject a service consumes are dead-lettered on their FIRST
delivery, with a reason, through the real subscribers of each declared spec on a real
nats-server; the handler is never called and nothing stays pending or comes back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext

from arcflow.common.events import DeadLetter, parse_event
from arcflow.common.nats import STREAM_DLQ
from arcflow.common.service import ServiceSpec
from arcflow.common.service.inprocess import subscriptions_only
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.nats_server import NatsServer
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.registrar.service import SERVICE as REGISTRAR
from tests.polling import eventually

pytestmark = pytest.mark.integration

_VALID = {
    "type": "k8s.object.changed",
    "source": "attacker",
    "api_version": "v1",
    "kind": "Pod",
    "resource": "pods",
    "namespace": "ns",
    "name": "x",
    "uid": "u",
    "change": "MODIFIED",
    "resource_version": "1",
}

#: name -> (payload, words the dead letter's reason must contain)
POISON: dict[str, tuple[bytes, str]] = {
    "deep": (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    "huge-int": (b'{"type": "k8s.object.changed", "n": ' + b"9" * 5000 + b"}", "number"),
    "int64": (json.dumps({**_VALID, "generation": 2**70}).encode(), "64-bit"),
    "garbage": (b"\xff\xfe not json", "not JSON"),
    "oversized": (json.dumps({**_VALID, "pad": "x" * 600_000}).encode(), "bytes, over"),
    "schema-v2": (json.dumps({**_VALID, "schema_version": 2}).encode(), "schema_version"),
    "unknown-type": (b'{"type": "nope", "source": "x"}', "unknown event type"),
}


def _concrete(filter_subject: str, case: str) -> str:
    """A subject inside a consumer's filter (``>`` and ``*`` filled in)."""
    tokens = filter_subject.split(".")
    if tokens[-1] == ">":
        tokens[-1:] = ["ns", case, "v"]
    return ".".join("x" if t == "*" else t for t in tokens)


@pytest.fixture
async def js(private_nats_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(private_nats_server.url)
    yield nc.jetstream()
    await nc.drain()


async def _run_with_untouchable_state(url: str, spec: ServiceSpec[Any]) -> ServiceRuntime:
    # a handler call would raise AttributeError (then retry, not dead-letter)
    return await subscriptions_only(url, spec, SimpleNamespace())


@pytest.mark.parametrize("spec", [REGISTRAR, RECONCILER], ids=lambda s: s.name)
async def test_poison_is_dead_lettered_on_first_delivery(
    private_nats_server: NatsServer, js: JetStreamContext, spec: ServiceSpec[Any]
) -> None:
    runtime = await _run_with_untouchable_state(private_nats_server.url, spec)
    try:
        sent: dict[str, str] = {}
        for subscription in spec.subscriptions:
            for case, (payload, _) in POISON.items():
                subject = _concrete(subscription.consumer.filter_subject, case)
                # The subscribers share this event loop and parse each poison as it lands, so
                # a PubAck can wait behind a parse on a loaded machine: a generous timeout.
                await js.publish(subject, payload, timeout=30)
                sent[subject] = case

        async def letters() -> dict[str, DeadLetter] | None:
            info = await js.stream_info(STREAM_DLQ.name)
            if info.state.messages < len(sent):
                return None
            found = {}
            for seq in range(1, info.state.last_seq + 1):
                event = parse_event((await js.get_msg(STREAM_DLQ.name, seq)).data or b"")
                assert isinstance(event, DeadLetter)
                found[event.original_subject] = event
            return found

        found = await eventually(letters, within=20)
        assert set(found) == set(sent)
        for subject, letter in found.items():
            assert letter.delivery_count == 1, (sent[subject], letter.reason)
            assert POISON[sent[subject]][1] in letter.reason, letter.reason
        for subscription in spec.subscriptions:
            consumer = subscription.consumer

            async def settled(consumer: Any = consumer) -> bool:
                # The ack follows the dead letter's publish: wait for it to land.
                info = await js.consumer_info(consumer.stream, consumer.durable)
                state = (info.num_pending, info.num_ack_pending, info.num_redelivered)
                assert state == (0, 0, 0), state
                return True

            await eventually(settled, within=20)
    finally:
        await runtime.stop()
