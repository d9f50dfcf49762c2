"""The runtime's light path, chosen by what a spec declares (ADR 0070): no subscriptions, so no
FastStream broker; ``streams`` narrows the layout; ``runtime_servers=False`` starts no server;
a settings loader's error is printed as it is; a ``Loop`` component ends the service when it
ends on its own and is stopped before the components started before it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from arcflow.common.nats import NatsConnection
from arcflow.common.nats.jetstream import STREAM_SCALE
from arcflow.common.service import InvalidSettingsError, Loop, Part, ServiceContext, ServiceSpec
from arcflow.common.service.entry import EXIT_INVALID_SETTINGS, main
from arcflow.common.service.runtime import ServiceFailedError, ServiceRuntime
from arcflow.devstack.nats_server import NatsServer
from tests.polling import eventually


@dataclass
class Settings:
    nats: NatsConnection


@dataclass
class State:
    ctx: ServiceContext
    log: list[str] = field(default_factory=list)


async def _build(ctx: ServiceContext) -> State:
    return State(ctx)


async def _until_stopped(state: State, stop: asyncio.Event) -> None:
    state.log.append("loop started")
    await stop.wait()
    state.log.append("loop stopped")


def _components(ctx: ServiceContext, state: State) -> list[Any]:
    async def closed() -> None:
        state.log.append("clients closed")

    return [
        Part("clients", on_stop=closed),
        Loop("work", lambda stop: _until_stopped(state, stop), ctx.fatal),
    ]


def _no_settings() -> Settings:
    raise InvalidSettingsError("light: fatal configuration error: the file says no")


LIGHT: ServiceSpec[State] = ServiceSpec(
    name="light",
    settings=_no_settings,
    build=_build,
    components=_components,
    streams=(STREAM_SCALE,),
    runtime_servers=False,
)


def test_a_loader_error_is_printed_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(LIGHT) == EXIT_INVALID_SETTINGS
    assert capsys.readouterr().err == "light: fatal configuration error: the file says no\n"


@pytest.mark.integration
async def test_plain_connection_declared_streams_no_servers(
    private_nats_server: NatsServer,
) -> None:
    runtime = ServiceRuntime(LIGHT, Settings(NatsConnection(url=private_nats_server.url)))
    await runtime.start()
    state: State = runtime.state
    try:
        assert runtime.broker is None  # plain nats-py, no FastStream broker
        assert runtime.health_port is None

        async def loop_started() -> bool:
            return state.log == ["loop started"]

        await eventually(loop_started, within=10)
        names = [info.config.name for info in await state.ctx.js.streams_info()]
        assert names == [STREAM_SCALE.name]
        assert runtime.healthy
    finally:
        await runtime.stop()
    assert state.log == ["loop started", "loop stopped", "clients closed"]
    assert state.ctx.nc.is_closed


@pytest.mark.integration
async def test_a_loop_that_fails_fails_the_service(private_nats_server: NatsServer) -> None:
    async def broken(stop: asyncio.Event) -> None:
        raise RuntimeError("session refused")

    def components(ctx: ServiceContext, state: State) -> list[Any]:
        return [Loop("work", broken, ctx.fatal)]

    spec = replace(LIGHT, components=components)
    runtime = ServiceRuntime(spec, Settings(NatsConnection(url=private_nats_server.url)))
    with pytest.raises(ServiceFailedError, match="session refused") as info:
        await asyncio.wait_for(runtime.run(asyncio.Event()), 20)
    assert isinstance(info.value.__cause__, RuntimeError)
