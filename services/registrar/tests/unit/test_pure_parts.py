"""Record keys, credential fingerprints, RPC models and event routing: pure, no servers."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from arcflow.common.events import K8sChange, K8sObjectChanged
from arcflow.registrar.consumer import ars_of_event
from arcflow.registrar.credentials import (
    ActionsClientCache,
    CredentialsUnavailableError,
    credentials_fingerprint,
    decode_secret_data,
    parse_credentials,
)
from arcflow.registrar.records import (
    InvalidRecordKeyError,
    ScaleSetRecord,
    ars_key_filter,
    parse_record_key,
    record_key,
)
from arcflow.registrar.rpc_api import (
    JitConfigRequest,
    JitConfigResult,
    RpcErrorCode,
    RpcReply,
    RunnerExistsRpcError,
    error_for,
    parse_request,
)

TOKEN = "ghp_" + "S" * 36


@pytest.mark.parametrize(
    ("ns", "ars", "variant", "key"),
    [
        ("team", "arc", "", "team.arc._"),
        ("team", "arc", "gpu", "team.arc.gpu"),
        ("team", "arc.v2", "big-1", "team.arc=v2.big-1"),
    ],
)
def test_record_keys_round_trip(ns: str, ars: str, variant: str, key: str) -> None:
    assert record_key(ns, ars, variant) == key
    assert parse_record_key(key) == (ns, ars, variant)
    assert ars_key_filter(ns, ars) == key.rsplit(".", 1)[0] + ".*"


@pytest.mark.parametrize("bad", ["", "a b", "a*", "a>", "_x"])
def test_record_keys_reject_non_kubernetes_names(bad: str) -> None:
    with pytest.raises(InvalidRecordKeyError):
        record_key("ns", bad)


def test_record_never_holds_secret_material() -> None:
    record = ScaleSetRecord(
        namespace="ns",
        ars="arc",
        scale_set_id=3,
        scale_set_name="arc",
        github_config_url="https://github.com/o",
        github_config_secret="creds",
    )
    assert set(json.loads(record.encode())) == {
        "namespace",
        "ars",
        "variant",
        "scale_set_id",
        "scale_set_name",
        "runner_group_id",
        "runner_group_name",
        "labels",
        "github_config_url",
        "github_config_secret",
        "ars_uid",
        "announced",
        "updated_at",
    }
    assert ScaleSetRecord.decode(record.encode()) == record


def test_fingerprint_is_a_digest_that_tracks_rotation() -> None:
    one = credentials_fingerprint({"github_token": TOKEN.encode(), "other": b"x"})
    assert TOKEN not in one
    assert len(one) == 64
    assert one == credentials_fingerprint({"github_token": TOKEN.encode()})
    assert one != credentials_fingerprint({"github_token": (TOKEN + "2").encode()})


def _secret(data: dict[str, Any]) -> dict[str, Any]:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_secret_decoding_and_errors_never_show_values() -> None:
    assert decode_secret_data(_secret({"github_token": TOKEN}), "ns/s") == {
        "github_token": TOKEN.encode()
    }
    with pytest.raises(CredentialsUnavailableError, match="github_token is not valid base64"):
        decode_secret_data({"data": {"github_token": TOKEN + "!"}}, "ns/s")
    with pytest.raises(CredentialsUnavailableError) as caught:
        parse_credentials({"github_token": TOKEN.encode(), "github_app_id": b"1"}, "ns/s")
    assert TOKEN not in str(caught.value)
    with pytest.raises(CredentialsUnavailableError, match="no credentials"):
        parse_credentials({}, "ns/s")


async def test_client_cache_reuses_per_fingerprint_and_url_and_evicts() -> None:
    built: list[tuple[str, Any]] = []
    closed: list[str] = []

    class FakeClient:
        def __init__(self, url: str) -> None:
            self.url = url

        async def aclose(self) -> None:
            closed.append(self.url)

    def factory(url: str, creds: Any) -> Any:
        built.append((url, creds))
        return FakeClient(url)

    cache = ActionsClientCache(factory, max_size=2)
    data = {"github_token": TOKEN.encode()}
    a = await cache.client_for("https://github.com/a", data, "ns/s")
    assert await cache.client_for("https://github.com/a/", data, "ns/s") is a
    await cache.client_for("https://github.com/b", data, "ns/s")
    rotated = {"github_token": (TOKEN + "x").encode()}
    await cache.client_for("https://github.com/a", rotated, "ns/s")
    assert len(built) == 3
    assert closed == ["https://github.com/a"]
    assert TOKEN not in repr(built[0][1])
    await cache.aclose()
    assert len(closed) == 3


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


def test_error_codes_map_to_typed_exceptions() -> None:
    failure = RpcReply[JitConfigResult].failure(RpcErrorCode.RUNNER_EXISTS, "taken")
    assert failure.error is not None
    error = error_for(failure.error)
    assert isinstance(error, RunnerExistsRpcError)
    assert error.code is RpcErrorCode.RUNNER_EXISTS
    assert json.loads(failure.encode()) == {
        "ok": False,
        "error": {"code": "runner_exists", "reason": "taken"},
    }


def _change(resource: str, change: K8sChange = "MODIFIED", **kw: Any) -> K8sObjectChanged:
    return K8sObjectChanged(
        source="t",
        api_version="actions.github.com/v1alpha1",
        kind="X",
        resource=resource,
        namespace="ns",
        name=kw.pop("name", "obj"),
        uid="u",
        change=change,
        resource_version="1",
        **kw,
    )


def test_event_routing() -> None:
    assert ars_of_event(_change("autoscalingrunnersets", name="arc")) == ("ns", "arc")
    assert ars_of_event(_change("autoscalingrunnersets", "DELETED", name="arc")) == ("ns", "arc")
    labels = {
        "actions.github.com/scale-set-name": "arc",
        "actions.github.com/scale-set-namespace": "ns",
    }
    assert ars_of_event(_change("ephemeralrunnersets", labels=labels)) is None
    assert ars_of_event(_change("ephemeralrunnersets", "DELETED", labels=labels)) == ("ns", "arc")
    assert ars_of_event(
        _change("ephemeralrunnersets", labels=labels, deletion_timestamp=datetime.now(UTC))
    ) == ("ns", "arc")
    assert ars_of_event(_change("ephemeralrunnersets", "DELETED")) is None
    assert ars_of_event(_change("pods", "DELETED", labels=labels)) is None
