"""`RegistrarRpcClient` against a real nats-server and a responder built from the contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from pydantic import SecretStr

from arcflow.common.rpc.registrar import (
    GET_RUNNER_SUBJECT,
    JITCONFIG_SUBJECT,
    REMOVE_RUNNER_SUBJECT,
    RPC_QUEUE_GROUP,
    CredentialsRpcError,
    GetRunnerRequest,
    GetRunnerResult,
    InvalidRequestRpcError,
    JitConfigRequest,
    JitConfigResult,
    NotFoundRpcError,
    RegistrarRpcClient,
    RegistrarRpcError,
    RegistrarUnavailableError,
    RemoveRunnerRequest,
    RemoveRunnerResult,
    RpcErrorCode,
    RpcReply,
    RunnerExistsRpcError,
    RunnerInfo,
    UpstreamRpcError,
    parse_request,
)
from arcflow.devstack.nats_server import NatsServer

pytestmark = pytest.mark.integration

Responder = Callable[[Msg], Awaitable[None]]


@pytest.fixture(scope="module")
def rpc_nats_server() -> Iterator[NatsServer]:
    """A broker of this module's own: the RPC subjects are fixed, so no other test shares them."""
    with NatsServer() as server:
        yield server


@pytest.fixture
async def nc(rpc_nats_server: NatsServer) -> AsyncIterator[NatsClient]:
    client = await nats.connect(rpc_nats_server.url)
    yield client
    await client.drain()


async def _serve(nc: NatsClient, subject: str, responder: Responder) -> None:
    await nc.subscribe(subject, queue=RPC_QUEUE_GROUP, cb=responder)
    await nc.flush()


async def test_calls_round_trip_through_a_contract_responder(nc: NatsClient) -> None:
    seen: list[object] = []

    async def jit(msg: Msg) -> None:
        request = parse_request(JitConfigRequest, msg.data)
        assert isinstance(request, JitConfigRequest)
        seen.append(request)
        result = JitConfigResult(
            runner_id=11,
            runner_name=request.runner_name,
            scale_set_id=request.scale_set_id,
            encoded_jit_config=SecretStr("JIT-" + request.runner_name),
        )
        await msg.respond(RpcReply[JitConfigResult].success(result).encode())

    async def remove(msg: Msg) -> None:
        request = parse_request(RemoveRunnerRequest, msg.data)
        seen.append(request)
        outcome = "job_still_running" if request.runner_id == 5 else "ok"  # type: ignore[attr-defined]
        await msg.respond(
            RpcReply[RemoveRunnerResult].success(RemoveRunnerResult(outcome=outcome)).encode()
        )

    async def get(msg: Msg) -> None:
        request = parse_request(GetRunnerRequest, msg.data)
        seen.append(request)
        runner = RunnerInfo(id=11, name="r1", runner_scale_set_id=7)
        found = request.runner_name == "r1"  # type: ignore[attr-defined]
        reply = GetRunnerResult(runner=runner if found else None)
        await msg.respond(RpcReply[GetRunnerResult].success(reply).encode())

    await _serve(nc, JITCONFIG_SUBJECT, jit)
    await _serve(nc, REMOVE_RUNNER_SUBJECT, remove)
    await _serve(nc, GET_RUNNER_SUBJECT, get)
    client = RegistrarRpcClient(nc, timeout=2)

    jit_result = await client.generate_jit_config("team", "arc", 7, "r1", "_w")
    assert jit_result.encoded_jit_config.get_secret_value() == "JIT-r1"
    assert (jit_result.runner_id, jit_result.runner_name, jit_result.scale_set_id) == (11, "r1", 7)
    assert await client.remove_runner("team", "arc", 4) == "ok"
    assert await client.remove_runner("team", "arc", 5) == "job_still_running"
    assert await client.get_runner("team", "arc", "r1") == RunnerInfo(
        id=11, name="r1", runner_scale_set_id=7
    )
    assert await client.get_runner("team", "arc", "other") is None
    # Every request carries the budget the registrar must answer within: 80 % of 2 s.
    assert seen[0] == JitConfigRequest(
        namespace="team",
        ars="arc",
        scale_set_id=7,
        runner_name="r1",
        work_folder="_w",
        budget_seconds=1.6,
    )
    assert len(seen) == 5


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (RpcErrorCode.RUNNER_EXISTS, RunnerExistsRpcError),
        (RpcErrorCode.NOT_FOUND, NotFoundRpcError),
        (RpcErrorCode.INVALID_REQUEST, InvalidRequestRpcError),
        (RpcErrorCode.CREDENTIALS, CredentialsRpcError),
        (RpcErrorCode.UPSTREAM_ERROR, UpstreamRpcError),
        (RpcErrorCode.INTERNAL, RegistrarRpcError),
    ],
    ids=str,
)
async def test_error_replies_raise_typed_errors(
    nc: NatsClient, code: RpcErrorCode, expected: type[RegistrarRpcError]
) -> None:
    async def fail(msg: Msg) -> None:
        await msg.respond(RpcReply[JitConfigResult].failure(code, f"because {code}").encode())

    await _serve(nc, JITCONFIG_SUBJECT, fail)
    with pytest.raises(expected) as caught:
        await RegistrarRpcClient(nc, timeout=2).generate_jit_config("team", "arc", 7, "r1")
    assert type(caught.value) is expected
    assert caught.value.code is code
    assert caught.value.reason == f"because {code}"


async def test_no_registrar_is_unavailable(nc: NatsClient) -> None:
    with pytest.raises(RegistrarUnavailableError, match="no registrar is serving"):
        await RegistrarRpcClient(nc, timeout=2).get_runner("team", "arc", "r1")


async def test_a_silent_registrar_times_out_as_unavailable(nc: NatsClient) -> None:
    async def never(msg: Msg) -> None:
        await asyncio.sleep(0)

    await _serve(nc, GET_RUNNER_SUBJECT, never)
    with pytest.raises(RegistrarUnavailableError, match="no reply"):
        await RegistrarRpcClient(nc, timeout=0.2).get_runner("team", "arc", "r1")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"not json", "malformed reply"),
        (b'{"ok": true, "result": {"outcome": "maybe"}}', "malformed reply"),
        (b'{"ok": false}', "neither result nor error"),
    ],
)
async def test_bad_replies_are_clear_errors(nc: NatsClient, payload: bytes, message: str) -> None:
    async def bad(msg: Msg) -> None:
        await msg.respond(payload)

    await _serve(nc, REMOVE_RUNNER_SUBJECT, bad)
    with pytest.raises(RegistrarRpcError, match=message) as caught:
        await RegistrarRpcClient(nc, timeout=2).remove_runner("team", "arc", 4)
    assert type(caught.value) is RegistrarRpcError
