"""Every fault knob, observed over raw HTTP (spec §6.7)."""

from __future__ import annotations

import time

import pytest

from arcflow.devstack.actions_sim import ActionsSimulator, TypeNames

pytestmark = pytest.mark.integration

SETS = "_apis/runtime/runnerscalesets"


async def test_status_fault_hits_n_times_with_retry_after_then_clears(raw):
    raw.sim.inject_status("*/runnerscalesets", 503, times=2, method="GET", retry_after=1)
    first = await raw.call("GET", SETS)
    second = await raw.call("GET", SETS)
    third = await raw.call("GET", SETS)
    assert [first.status_code, second.status_code, third.status_code] == [503, 503, 200]
    assert first.headers["Retry-After"] == "1"
    assert first.headers["ActivityId"]
    assert "typeName" in first.json()
    posted = await raw.call("POST", SETS, json={"name": "not-affected"})
    assert posted.status_code == 200, "method filter"
    assert [r.status for r in raw.sim.requests_matching("*/runnerscalesets", "GET")] == [
        503,
        503,
        200,
    ]


async def test_429_with_http_date_retry_after(raw):
    raw.sim.inject_status("*/runnergroups/*", 429, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    r = await raw.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "Default"})
    assert r.status_code == 429
    assert r.headers["Retry-After"].endswith("GMT")


async def test_runner_registration_fails_k_times(actions_sim: ActionsSimulator, raw):
    actions_sim.fail_runner_registration(403, times=2)
    with pytest.raises(AssertionError):
        await raw.login()
    with pytest.raises(AssertionError):
        await raw.login()
    await raw.login()
    statuses = [r.status for r in actions_sim.requests_matching("*/runner-registration")]
    assert statuses == [201, 403, 403, 201]
    with pytest.raises(ValueError):
        actions_sim.fail_runner_registration(500)


async def test_expired_mq_token_fault_hits_the_next_mq_call_only(raw):
    scale_set_id = await raw.create_scale_set("mq-fault")
    session = await raw.open_session(scale_set_id)
    raw.sim.enqueue_job(["mq-fault"])
    raw.sim.expire_next_mq_token()
    assert (await session.get()).status_code == 401
    assert (await session.get()).status_code == 200
    raw.sim.expire_next_mq_token()
    assert (await session.acquire([])).status_code == 401
    raw.sim.expire_next_mq_token()
    assert (await session.delete(1)).status_code == 401
    admin = await raw.call("GET", f"{SETS}/{scale_set_id}")
    assert admin.status_code == 200


async def test_bom_prefix_on_json_bodies(raw):
    raw.sim.set_bom()
    r = await raw.call("GET", f"{SETS}")
    assert r.content.startswith(b"\xef\xbb\xbf{")
    raw.sim.set_bom(False)
    assert (await raw.call("GET", SETS)).content.startswith(b"{")


async def test_empty_body_and_empty_queue_url_and_slow_polls(raw):
    scale_set_id = await raw.create_scale_set("odd")
    raw.sim.empty_message_queue_url()
    odd = await raw.call("POST", f"{SETS}/{scale_set_id}/sessions", json={"ownerName": "x"})
    assert odd.status_code == 200
    assert odd.json()["messageQueueUrl"] == ""
    await raw.call("DELETE", f"{SETS}/{scale_set_id}/sessions/{odd.json()['sessionId']}")
    session = await raw.open_session(scale_set_id)
    assert session.mq_url, "only the next session answer is affected"
    raw.sim.enqueue_job(["odd"])
    raw.sim.empty_message_body()
    empty = await session.get()
    assert empty.status_code == 200
    assert empty.content == b""
    assert (await session.messages())[1], "the message was not lost"
    raw.sim.set_slow_polls(0.3)
    started = time.monotonic()
    await session.messages()
    assert time.monotonic() - started >= 0.3


async def test_session_conflict_and_refresh_404_faults(raw):
    scale_set_id = await raw.create_scale_set("sess-fault")
    raw.sim.conflict_session_create()
    conflict = await raw.call("POST", f"{SETS}/{scale_set_id}/sessions", json={"ownerName": "x"})
    assert conflict.status_code == 409
    assert conflict.json()["typeName"] == TypeNames.SESSION_CONFLICT
    session = await raw.open_session(scale_set_id)
    raw.sim.fail_session_refresh()
    refresh = await raw.call("PATCH", f"{SETS}/{scale_set_id}/sessions/{session.id}")
    assert refresh.status_code == 404
    assert (
        await raw.call("PATCH", f"{SETS}/{scale_set_id}/sessions/{session.id}")
    ).status_code == 200


async def test_text_plain_400(raw):
    raw.sim.text_plain_errors("*/generatejitconfig")
    r = await raw.jit(1, "x")
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("text/plain")
    assert "plain text" in r.text


async def test_zero_runner_request_ids_in_direct_mode(raw):
    scale_set_id = await raw.create_scale_set("zero")
    session = await raw.open_session(scale_set_id)
    raw.sim.set_zero_runner_request_ids()
    raw.sim.enqueue_job(["zero"])
    _, jobs, _ = await session.messages()
    assert jobs[0]["runnerRequestId"] == 0


async def test_clear_faults_and_bad_rules(actions_sim: ActionsSimulator):
    actions_sim.inject_status("*", 500, times=3)
    actions_sim.set_bom()
    actions_sim.clear_faults()
    assert actions_sim.faults.describe()["rules"] == []
    assert actions_sim.faults.bom is False
    with pytest.raises(ValueError):
        actions_sim.inject_status("*", 700)
    with pytest.raises(ValueError):
        actions_sim.inject_status("*", 500, times=0)


async def test_nil_session_id_leaves_no_session(raw):
    scale_set_id = await raw.create_scale_set("nil")
    raw.sim.nil_session_id()
    nil = await raw.call("POST", f"{SETS}/{scale_set_id}/sessions", json={"ownerName": "x"})
    assert nil.status_code == 200
    assert nil.json()["sessionId"] == "00000000-0000-0000-0000-000000000000"
    assert "sessionId=00000000-0000-0000-0000-000000000000" in nil.json()["messageQueueUrl"]
    assert raw.sim.snapshot()["scaleSets"][0]["session"] is None
    session = await raw.open_session(scale_set_id)  # not a 409: nothing was kept
    assert session.mq_url
