"""The service runtime on a real nats-server: a handler call that hangs is abandoned at its
deadline and retried, while the other messages of the same fetch are handled meanwhile; no
extra consumer is left on the stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext
from pydantic_settings import BaseSettings

from arcflow.common import subjects
from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats import NatsSettings, publish_event
from arcflow.common.nats.consume import Delivery
from arcflow.common.nats.jetstream import STREAM_DLQ, STREAM_K8S, ConsumerSpec, ensure_stream
from arcflow.common.service import ServiceSpec, Subscription
from arcflow.common.service.runtime import ServiceRuntime
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually

pytestmark = pytest.mark.integration

CONSUMER = ConsumerSpec(
    "test-hung", STREAM_K8S.name, "arc.k8s.>", retry_delay_seconds=0.05, ack_wait_seconds=30
)


class Settings(BaseSettings):
    health_host: str = "127.0.0.1"
    health_port: int = 0
    fetch_timeout_seconds: float = 0.2


class State:
    def __init__(self) -> None:
        self.done: list[str] = []
        self.attempts: dict[str, int] = {}


async def handle(state: State, event: K8sObjectChanged, delivery: Delivery) -> None:
    state.attempts[event.name] = state.attempts.get(event.name, 0) + 1
    if event.name == "stuck" and state.attempts[event.name] == 1:
        await asyncio.Event().wait()  # hangs until the runtime abandons it
    state.done.append(event.name)


async def _build(_ctx: Any) -> State:
    return State()


SPEC: ServiceSpec[State] = ServiceSpec(
    name="tester",
    settings=Settings,
    build=_build,
    subscriptions=(
        Subscription(
            CONSUMER, (K8sObjectChanged,), handle, concurrency=4, deadline_seconds=lambda _: 0.5
        ),
    ),
)


def _event(name: str) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="test",
        api_version="v1",
        kind="Pod",
        resource="pods",
        namespace="ns",
        name=name,
        uid=name,
        change="ADDED",
        resource_version="1",
    )


@contextlib.asynccontextmanager
async def running(
    spec: ServiceSpec[Any], server: NatsServer, names: list[str]
) -> AsyncIterator[tuple[Any, JetStreamContext]]:
    """One event per name in the stream, then ``spec`` on the runtime (no servers): its first
    fetch finds them all, so what each fetch holds does not depend on timing. Yields the
    service's state and a JetStream client, and stops both on the way out."""
    nc = await nats.connect(server.url)
    js = nc.jetstream()
    runtime = ServiceRuntime(
        spec,
        Settings(),
        nats_settings=NatsSettings(url=server.url),
        serve_health=False,
        serve_metrics=False,
    )
    try:
        await ensure_stream(js, STREAM_K8S)
        for name in names:
            await publish_event(js, subjects.k8s_subject("pods", "ns", name), _event(name))
        await runtime.start()
        yield runtime.state, js
    finally:
        await nc.drain()
        await runtime.stop()


async def test_a_hung_handler_is_abandoned_retried_and_blocks_nothing(
    private_nats_server: NatsServer,
) -> None:
    names = ["stuck", *(f"ok-{i}" for i in range(6))]
    async with running(SPEC, private_nats_server, names) as (state, js):

        async def others_done() -> bool:
            return set(state.done) >= set(names[1:])

        async def stuck_done() -> bool:
            return "stuck" in state.done

        await eventually(others_done, within=10)
        assert "stuck" not in state.done  # the others did not wait for it
        await eventually(stuck_done, within=10)
        assert state.attempts["stuck"] == 2

        async def all_acked() -> bool:
            # the handler records "stuck" as done before the runtime acks it
            info = await js.consumer_info(CONSUMER.stream, CONSUMER.durable)
            assert (info.num_pending, info.num_ack_pending) == (0, 0)
            return True

        await eventually(all_acked, within=10, what="no message pending or awaiting its ack")
        assert (await js.stream_info(STREAM_K8S.name)).state.consumer_count == 1
        assert (await js.stream_info(STREAM_DLQ.name)).state.messages == 0


SLACK_CONSUMER = ConsumerSpec("test-slack", STREAM_K8S.name, "arc.k8s.>", ack_wait_seconds=2.0)


async def handle_slowly(state: State, event: K8sObjectChanged, delivery: Delivery) -> None:
    state.attempts[event.name] = delivery.delivery_count
    await asyncio.sleep(1.3)  # within the 1.8 s deadline, but two in a row outlast the ack wait
    state.done.append(event.name)


SLACK_SPEC: ServiceSpec[State] = ServiceSpec(
    name="tester",
    settings=Settings,
    build=_build,
    subscriptions=(
        Subscription(
            SLACK_CONSUMER,
            (K8sObjectChanged,),
            handle_slowly,
            concurrency=2,
            batch=2,
            deadline_seconds=lambda _: 1.8,
        ),
    ),
)


async def test_a_message_that_waited_for_a_worker_is_not_redelivered_while_handled(
    private_nats_server: NatsServer,
) -> None:
    """The second fetch waits ~1.3 s for the two workers, then runs 1.3 s: past its 2 s ack
    wait unless the wait restarted it (+WPI), which the server's redelivery count shows."""
    names = [f"m-{i}" for i in range(4)]
    async with running(SLACK_SPEC, private_nats_server, names) as (state, js):

        async def all_settled() -> bool:
            info = await js.consumer_info(SLACK_CONSUMER.stream, SLACK_CONSUMER.durable)
            assert sorted(state.done) == names, state.done
            return (info.num_pending, info.num_ack_pending) == (0, 0)

        await eventually(all_settled, within=15)
        info = await js.consumer_info(SLACK_CONSUMER.stream, SLACK_CONSUMER.durable)
        assert info.num_redelivered == 0
        assert state.attempts == dict.fromkeys(names, 1)


PACED_CONSUMER = ConsumerSpec("test-paced", STREAM_K8S.name, "arc.k8s.>")


class Gate:
    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.done: list[str] = []


async def handle_when_open(state: Gate, event: K8sObjectChanged, delivery: Delivery) -> None:
    await state.open.wait()
    state.done.append(event.name)


async def _build_gate(_ctx: Any) -> Gate:
    return Gate()


PACED_SPEC: ServiceSpec[Gate] = ServiceSpec(
    name="tester",
    settings=Settings,
    build=_build_gate,
    subscriptions=(
        Subscription(PACED_CONSUMER, (K8sObjectChanged,), handle_when_open, concurrency=2, batch=2),
    ),
)


async def test_with_every_worker_busy_no_fetch_waits(
    private_nats_server: NatsServer,
) -> None:
    """Two workers held on the one fetch's two messages; the next fetch waits for the batch to
    be settled, so the rest stays on the server however long the workers are busy."""
    names = [f"p-{i}" for i in range(6)]
    async with running(PACED_SPEC, private_nats_server, names) as (state, js):

        async def counts() -> tuple[int, int]:
            info = await js.consumer_info(PACED_CONSUMER.stream, PACED_CONSUMER.durable)
            return int(info.num_ack_pending or 0), int(info.num_pending or 0)

        async def fetched_ahead() -> tuple[int, int]:
            # the one batch of two delivered, both held by the workers; the rest on the server
            found = await counts()
            assert found == (2, len(names) - 2), found
            return found

        seen = await eventually(fetched_ahead, within=10)
        await asyncio.sleep(0.6)  # three fetch timeouts: an unpaced loop would fetch on
        assert await counts() == seen
        state.open.set()

        async def all_done() -> bool:
            return sorted(state.done) == names and await counts() == (0, 0)

        await eventually(all_done, within=10)
