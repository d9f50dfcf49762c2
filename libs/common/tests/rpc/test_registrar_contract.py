"""The registrar RPC wire contract, pure: every request and reply round-trips, errors map."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from pydantic import BaseModel, SecretStr

from arcflow.common.rpc.registrar import (
    CredentialsRpcError,
    GetRunnerRequest,
    GetRunnerResult,
    InvalidRequestRpcError,
    JitConfigRequest,
    JitConfigResult,
    NotFoundRpcError,
    RegistrarRpcError,
    RemoveOutcome,
    RemoveRunnerRequest,
    RemoveRunnerResult,
    RpcError,
    RpcErrorCode,
    RpcReply,
    RunnerExistsRpcError,
    RunnerInfo,
    UpstreamRpcError,
    error_for,
    parse_request,
)

REQUESTS: list[BaseModel] = [
    JitConfigRequest(
        namespace="team", ars="arc.v2", scale_set_id=7, runner_name="arc-gpu-x1", work_folder="_w"
    ),
    JitConfigRequest(namespace="team", ars="arc", scale_set_id=1, runner_name="r"),
    RemoveRunnerRequest(namespace="team", ars="arc", runner_id=42),
    GetRunnerRequest(namespace="team", ars="arc", runner_name="arc-gpu-x1"),
]


@pytest.mark.parametrize("request_model", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_request_round_trips_through_the_server_parser(request_model: BaseModel) -> None:
    wire = request_model.model_dump_json().encode()
    parsed = parse_request(type(request_model), wire)  # type: ignore[arg-type]
    assert parsed == request_model


RESULTS: list[BaseModel] = [
    JitConfigResult(
        runner_id=9, runner_name="r", scale_set_id=7, encoded_jit_config=SecretStr("JIT")
    ),
    *(RemoveRunnerResult(outcome=o) for o in get_args(RemoveOutcome)),
    GetRunnerResult(runner=RunnerInfo(id=9, name="r", runner_scale_set_id=7)),
    GetRunnerResult(runner=None),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: f"{type(r).__name__}")
def test_every_success_reply_round_trips(result: BaseModel) -> None:
    wire = RpcReply[type(result)].success(result).encode()  # type: ignore[misc]
    body = json.loads(wire)
    assert body["ok"] is True
    assert "error" not in body
    parsed = RpcReply[type(result)].model_validate_json(wire)  # type: ignore[misc]
    assert parsed.result == result
    assert parsed.error is None


def test_get_runner_none_travels_as_an_empty_result() -> None:
    wire = RpcReply[GetRunnerResult].success(GetRunnerResult()).encode()
    assert json.loads(wire) == {"ok": True, "result": {}}


def test_jit_result_masks_its_secret_except_on_the_wire() -> None:
    result = JitConfigResult(
        runner_id=1, runner_name="r", scale_set_id=2, encoded_jit_config=SecretStr("JITSECRET")
    )
    assert "JITSECRET" not in repr(result)
    assert "JITSECRET" not in str(result.model_dump())
    wire = RpcReply[JitConfigResult].success(result).encode()
    assert json.loads(wire)["result"]["encoded_jit_config"] == "JITSECRET"
    parsed = RpcReply[JitConfigResult].model_validate_json(wire)
    assert parsed.result is not None
    assert parsed.result.encoded_jit_config.get_secret_value() == "JITSECRET"
    assert "JITSECRET" not in repr(parsed)


def test_request_validation_names_fields_not_values() -> None:
    with pytest.raises(ValueError, match="scale_set_id") as caught:
        parse_request(
            JitConfigRequest,
            json.dumps(
                {"namespace": "n", "ars": "a", "scale_set_id": 0, "runner_name": "SECRETISH"}
            ).encode(),
        )
    assert "SECRETISH" not in str(caught.value)
    with pytest.raises(ValueError, match=r"extra_forbidden|Extra inputs"):
        parse_request(
            JitConfigRequest,
            b'{"namespace":"n","ars":"a","scale_set_id":1,"runner_name":"r","token":"x"}',
        )
    with pytest.raises(ValueError, match="<root>"):
        parse_request(RemoveRunnerRequest, b"not json")
    with pytest.raises(ValueError, match="namespace"):
        parse_request(GetRunnerRequest, b'{"namespace":"","ars":"a","runner_name":"r"}')


ERROR_CLASSES: dict[RpcErrorCode, type[RegistrarRpcError]] = {
    RpcErrorCode.RUNNER_EXISTS: RunnerExistsRpcError,
    RpcErrorCode.NOT_FOUND: NotFoundRpcError,
    RpcErrorCode.INVALID_REQUEST: InvalidRequestRpcError,
    RpcErrorCode.CREDENTIALS: CredentialsRpcError,
    RpcErrorCode.UPSTREAM_ERROR: UpstreamRpcError,
    RpcErrorCode.INTERNAL: RegistrarRpcError,
}


def test_every_error_code_has_an_expected_class() -> None:
    assert set(ERROR_CLASSES) == set(RpcErrorCode)


@pytest.mark.parametrize("code", list(RpcErrorCode), ids=str)
def test_failure_reply_round_trips_and_maps_to_its_typed_error(code: RpcErrorCode) -> None:
    failure = RpcReply[JitConfigResult].failure(code, "why")
    wire = failure.encode()
    assert json.loads(wire) == {"ok": False, "error": {"code": code.value, "reason": "why"}}
    parsed = RpcReply[JitConfigResult].model_validate_json(wire)
    assert parsed == failure
    assert parsed.error is not None
    error = error_for(parsed.error)
    assert type(error) is ERROR_CLASSES[code]
    assert error.code is code
    assert error.reason == "why"
    assert str(error) == "why"


def test_unknown_error_code_does_not_parse() -> None:
    with pytest.raises(ValueError, match="code"):
        RpcError.model_validate({"code": "teapot", "reason": "x"})
