"""Bad input on the registrar's RPC subjects, against the real nats-server (issue 12): every
malformed, oversized, too deep or wrong-typed request gets an ``invalid_request`` reply that
names fields (never values), is counted and logged (rate-limited), reaches no stream, and the
registrar keeps answering good requests."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from arcflow.common.rpc.registrar import (
    GET_RUNNER_SUBJECT,
    JITCONFIG_SUBJECT,
    LIST_RUNNERS_SUBJECT,
    REMOVE_RUNNER_SUBJECT,
    RegistrarRpcClient,
)
from tests.metrics import metric_total
from tests.polling import eventually

from .harness import LogCapture, Stack, all_stored_messages
from .test_lifecycle import apply_ars, registered

pytestmark = pytest.mark.integration

LONG = "a" * 200_000
#: Sent on every RPC subject.
COMMON: dict[str, bytes] = {
    "garbage": b"not json",
    "empty": b"",
    "binary": b"\xff\xfe\x00\x01",
    "array": b"[1, 2]",
    "null": b"null",
    "deep": b'{"namespace": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "huge integer": b'{"namespace": "ns", "ars": "a", "runner_id": ' + b"9" * 5000 + b"}",
    "oversized": json.dumps({"namespace": LONG, "ars": "a"}).encode(),
    "not a namespace": b'{"namespace": "../Etc", "ars": "a", "runner_id": 1}',
    "unknown field": b'{"namespace": "ns", "ars": "a", "runner_id": 1, "x": 1}',
}
#: Right fields, wrong types.
WRONG_TYPES: dict[str, list[bytes]] = {
    JITCONFIG_SUBJECT: [
        b'{"namespace": "ns", "ars": "a", "scale_set_id": "7", "runner_name": "r"}',
        b'{"namespace": "ns", "ars": "a", "scale_set_id": 7.5, "runner_name": "r"}',
    ],
    REMOVE_RUNNER_SUBJECT: [
        b'{"namespace": "ns", "ars": "a", "runner_id": true}',
        b'{"namespace": "ns", "ars": "a", "runner_id": "12"}',
    ],
    GET_RUNNER_SUBJECT: [b'{"namespace": "ns", "ars": "a", "runner_name": 12}'],
    LIST_RUNNERS_SUBJECT: [
        b'{"namespace": "ns", "ars": "a"}',
        b'{"namespace": "ns", "ars": "a", "scale_set_ids": [7], "scale_set_id": 7}',
        b'{"namespace": "ns", "ars": "a", "scale_set_ids": [0]}',
        b'{"namespace": "ns", "ars": "a", "scale_set_ids": ["7"]}',
        b'{"namespace": "ns", "ars": "a", "scale_set_ids": 7}',
        b'{"namespace": "ns", "ars": "a", "scale_set_ids": [' + b"1, " * 1000 + b"1]}",
    ],
}


async def test_bad_requests_get_clear_errors_and_break_nothing(
    stack: Stack, captured_logs: LogCapture
) -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar(meter=meter)
    await apply_ars(stack, stack.ars_manifest("bad"))
    sets = await eventually(lambda: registered(stack, {"bad"}))

    sent = 0
    for subject in WRONG_TYPES:
        for what, payload in [*COMMON.items(), *(("wrong type", p) for p in WRONG_TYPES[subject])]:
            reply = await stack.nc.request(subject, payload, timeout=5)
            sent += 1
            body = json.loads(reply.data)
            assert body["ok"] is False, (subject, what)
            assert body["error"]["code"] == "invalid_request", (subject, what, body)
            assert body["error"]["reason"].startswith("invalid "), (subject, what, body)
            assert len(reply.data) < 2048, (subject, what)  # never an echo of the input
            assert LONG[:100] not in body["error"]["reason"]

    assert metric_total(reader, "arcflow_registrar_rpc_requests", outcome="invalid_request") == sent
    warnings = [line for line in captured_logs.lines if "rejected an invalid RPC request" in line]
    assert 1 <= len(warnings) <= len(WRONG_TYPES), warnings  # one per subject, then counted
    assert LONG[:100] not in captured_logs.text

    # Nothing else broke: a good request is served, no RPC payload reached a stream.
    client = RegistrarRpcClient(stack.nc, timeout=10)
    jit = await client.generate_jit_config(stack.namespace, "bad", sets["bad"]["id"], "bad-r1")
    assert jit.runner_name == "bad-r1"
    for _stream, subject, _data in await all_stored_messages(stack.js):
        assert ".rpc." not in subject, subject


async def test_list_runners_answers_several_scale_sets_from_one_listing(stack: Stack) -> None:
    """ADR 0121: the runners of the named scale sets, each with its set, from one GitHub
    listing; the single ``scale_set_id`` of older callers still works."""
    await stack.create_secret({"github_token": stack.pat})
    await stack.start_registrar()
    await apply_ars(stack, stack.ars_manifest("two", [{"name": "a"}, {"name": "b"}, {"name": "c"}]))
    sets = await eventually(lambda: registered(stack, {"two-a", "two-b", "two-c"}))
    ids = {v: sets[f"two-{v}"]["id"] for v in "abc"}
    for variant, scale_set_id in ids.items():
        stack.sim.engine.generate_jit_config(scale_set_id, {"name": f"runner-{variant}"})
    client = RegistrarRpcClient(stack.nc, timeout=10)
    listings = len(stack.sim.requests_matching("*/agents", "GET"))

    both = await client.list_runners(stack.namespace, "two", [ids["a"], ids["b"]])
    assert sorted((r.name, r.runner_scale_set_id) for r in both) == [
        ("runner-a", ids["a"]),
        ("runner-b", ids["b"]),
    ]
    assert len(stack.sim.requests_matching("*/agents", "GET")) == listings + 1

    request = {"namespace": stack.namespace, "ars": "two", "scale_set_id": ids["c"]}
    reply = json.loads(
        (
            await stack.nc.request(LIST_RUNNERS_SUBJECT, json.dumps(request).encode(), timeout=10)
        ).data
    )
    assert reply["ok"] is True, reply
    assert [r["name"] for r in reply["result"]["runners"]] == ["runner-c"]
