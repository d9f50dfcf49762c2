"""The registrar's core-NATS RPCs, end to end, and that no secret reaches a stream or a log."""

from __future__ import annotations

import json

import pytest

from arcflow.common.nats import STREAMS
from arcflow.common.rpc.registrar import (
    JITCONFIG_SUBJECT,
    CredentialsRpcError,
    InvalidRequestRpcError,
    JitConfigResult,
    NotFoundRpcError,
    RegistrarRpcClient,
    RegistrarUnavailableError,
    RpcReply,
    RunnerExistsRpcError,
    error_for,
)
from arcflow.registrar.service import SERVICE
from tests.polling import eventually

from .harness import SECRET_NAME, LogCapture, Stack, all_stored_messages
from .test_lifecycle import apply_ars, registered

pytestmark = pytest.mark.integration


async def _stream_totals(stack: Stack) -> dict[str, int]:
    totals = {}
    for spec in STREAMS:
        info = await stack.js.stream_info(spec.name)
        totals[spec.name] = info.state.messages
    return totals


async def test_rpcs_work_and_never_touch_a_stream(stack: Stack, captured_logs: LogCapture) -> None:
    await stack.create_secret({"github_token": stack.pat})
    r1 = await stack.start_registrar("r1")
    await stack.start_registrar("r2")
    # Served from the spec's declaration: exactly the declared subjects.
    assert r1.state.rpc.served_subjects == [e.subject for e in SERVICE.rpc]
    assert len(SERVICE.rpc) == 5
    await apply_ars(stack, stack.ars_manifest("rpc", [{"name": "a"}, {"name": "b"}]))
    sets = await eventually(lambda: registered(stack, {"rpc-a", "rpc-b"}))
    records = await eventually(lambda: _records(stack, "rpc", 2))
    set_a = records["a"].scale_set_id
    assert set_a == sets["rpc-a"]["id"]

    # Nothing stores rpc subjects.
    for spec in STREAMS:
        assert not any(s.startswith("arc.rpc") or s in {">", "arc.>"} for s in spec.subjects)
    before = await _stream_totals(stack)

    client = RegistrarRpcClient(stack.nc, timeout=5)
    jit = await client.generate_jit_config(stack.namespace, "rpc", set_a, "rpc-a-runner-1", "/w")
    secret_jit = jit.encoded_jit_config.get_secret_value()
    assert secret_jit
    assert secret_jit not in repr(jit)
    assert jit.runner_name == "rpc-a-runner-1"
    assert jit.scale_set_id == set_a

    with pytest.raises(RunnerExistsRpcError):
        await client.generate_jit_config(stack.namespace, "rpc", set_a, "rpc-a-runner-1")
    with pytest.raises(NotFoundRpcError):
        await client.generate_jit_config(stack.namespace, "rpc", 999_999, "x")
    with pytest.raises(NotFoundRpcError):
        await client.generate_jit_config(stack.namespace, "nope", set_a, "x")

    found = await client.get_runner(stack.namespace, "rpc", "rpc-a-runner-1")
    assert found is not None
    assert found.id == jit.runner_id
    assert found.runner_scale_set_id == set_a
    assert await client.get_runner(stack.namespace, "rpc", "missing") is None

    # A runner busy with a job cannot be removed; an idle one can, once.
    job = stack.sim.enqueue_job(["rpc-a"])
    stack.sim.connect_runner(secret_jit)
    await stack.sim.wait_for_job_state(job, "running", within=5)
    assert await client.remove_runner(stack.namespace, "rpc", jit.runner_id) == "job_still_running"
    stack.sim.complete_job(job)
    idle = await client.generate_jit_config(stack.namespace, "rpc", set_a, "rpc-a-runner-2")
    assert await client.remove_runner(stack.namespace, "rpc", idle.runner_id) == "ok"
    assert await client.remove_runner(stack.namespace, "rpc", idle.runner_id) == "not_found"

    # Malformed requests get a typed error, not silence.
    reply = await stack.nc.request(JITCONFIG_SUBJECT, b'{"namespace": 1}', timeout=5)
    body = json.loads(reply.data)
    assert body["ok"] is False
    assert body["error"]["code"] == "invalid_request"
    assert "scale_set_id" in body["error"]["reason"]
    garbage = await stack.nc.request(JITCONFIG_SUBJECT, b"not json", timeout=5)
    with pytest.raises(InvalidRequestRpcError):
        raise error_for(RpcReply[JitConfigResult].model_validate_json(garbage.data).error)  # type: ignore[arg-type]

    assert await _stream_totals(stack) == before, "RPC traffic reached a stream"

    stored = await all_stored_messages(stack.js)
    assert stored, "expected events and records to be stored"
    for stream, subject, data in stored:
        assert not subject.startswith("arc.rpc"), (stream, subject)
        assert stack.pat.encode() not in data, (stream, subject)
        assert secret_jit.encode() not in data, (stream, subject)
    assert stack.pat not in captured_logs.text
    assert secret_jit not in captured_logs.text
    assert idle.encoded_jit_config.get_secret_value() not in captured_logs.text


async def _records(stack: Stack, ars: str, count: int) -> object:
    records = await stack.records(ars)
    assert len(records) == count
    return records


async def test_client_reports_no_registrar(stack: Stack) -> None:
    client = RegistrarRpcClient(stack.nc, timeout=0.5)
    with pytest.raises(RegistrarUnavailableError):
        await client.get_runner(stack.namespace, "rpc", "x")


async def test_credentials_never_logged_in_failures(
    stack: Stack, captured_logs: LogCapture
) -> None:
    # A token the simulator does not know: registration fails upstream (401 on the token
    # chain); the failure is reported without the token.
    bogus = "ghp_" + "Z" * 36
    await stack.create_secret({"github_token": bogus})
    await stack.start_registrar(run_sweep=False)
    await apply_ars(stack, stack.ars_manifest("leak"))
    from arcflow.common.events import RegistrationFailed

    async def failed() -> bool:
        events = await stack.stream_events("ARC_ERRORS")
        return any(isinstance(e, RegistrationFailed) for _, e in events)

    await eventually(failed)
    for _stream, _subject, data in await all_stored_messages(stack.js):
        assert bogus.encode() not in data
    assert bogus not in captured_logs.text


async def test_jit_answers_follow_the_credentials_secret(stack: Stack) -> None:
    """JIT requests are answered from the registrar's watched copy of the ARS, the records and
    the credentials Secret: deleting the Secret is noticed, recreating it too."""
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar(run_sweep=False)
    await apply_ars(stack, stack.ars_manifest("rot"))
    records = await eventually(lambda: _records(stack, "rot", 1))
    set_id = next(iter(records.values())).scale_set_id  # type: ignore[attr-defined]
    client = RegistrarRpcClient(stack.nc, timeout=5)
    await client.generate_jit_config(stack.namespace, "rot", set_id, "rot-runner-1")

    await stack.kube.delete("Secret", SECRET_NAME, namespace=stack.namespace)

    async def refused() -> bool:
        try:
            await client.generate_jit_config(stack.namespace, "rot", set_id, "rot-runner-2")
        except CredentialsRpcError as exc:
            return "not found" in str(exc)
        return False

    await eventually(refused, what="a JIT request refused for the missing Secret")
    await stack.create_secret({"github_token": stack.pat})

    async def served() -> bool:
        try:
            await client.generate_jit_config(stack.namespace, "rot", set_id, "rot-runner-3")
        except CredentialsRpcError:
            return False
        return True

    await eventually(served, what="JIT requests served again once the Secret is back")


async def test_jit_request_for_an_unknown_ars_on_a_fresh_bucket_is_not_found(
    stack: Stack,
) -> None:
    """No ARS and no registration at all (an empty KV bucket): ``not_found``, not an
    internal timeout."""
    await stack.start_registrar(run_sweep=False)
    client = RegistrarRpcClient(stack.nc, timeout=10)
    with pytest.raises(NotFoundRpcError):
        await client.generate_jit_config(stack.namespace, "ghost", 1, "ghost-runner")
