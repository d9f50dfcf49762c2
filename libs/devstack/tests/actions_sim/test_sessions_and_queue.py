"""Sessions, long polls, batching, acks and capacity (spec §6.3-6.5), over raw HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest

from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration

SETS = "_apis/runtime/runnerscalesets"


async def test_one_live_session_per_scale_set_then_idle_expiry(raw):
    scale_set_id = await raw.create_scale_set("single")
    first = await raw.open_session(scale_set_id, owner="listener-a")
    assert first.body["ownerName"] == "listener-a"
    assert first.body["runnerScaleSet"]["id"] == scale_set_id
    assert first.body["statistics"]["totalAssignedJobs"] == 0
    assert first.id != "00000000-0000-0000-0000-000000000000"
    conflict = await raw.call("POST", f"{SETS}/{scale_set_id}/sessions", json={"ownerName": "b"})
    assert conflict.status_code == 409
    assert conflict.json()["typeName"] == (
        "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException, "
        "GitHub.Actions.Runtime.WebApi"
    )
    raw.sim.set_session_idle_timeout(0.2)
    await asyncio.sleep(0.3)
    second = await raw.open_session(scale_set_id, owner="listener-b")
    assert second.id != first.id
    assert (await first.get()).status_code == 401, "the expired session's token is dead"


async def test_refresh_gives_a_new_token_and_delete_ends_the_session(raw):
    scale_set_id = await raw.create_scale_set("refresh")
    session = await raw.open_session(scale_set_id)
    refreshed = await raw.call("PATCH", f"{SETS}/{scale_set_id}/sessions/{session.id}")
    assert refreshed.status_code == 200
    assert refreshed.json()["sessionId"] == session.id
    assert refreshed.json()["messageQueueAccessToken"] != session.token
    assert "statistics" in refreshed.json()
    unknown = await raw.call("PATCH", f"{SETS}/{scale_set_id}/sessions/not-a-session")
    assert unknown.status_code == 404
    deleted = await raw.call("DELETE", f"{SETS}/{scale_set_id}/sessions/{session.id}")
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert (await session.get()).status_code == 401
    again = await raw.call("DELETE", f"{SETS}/{scale_set_id}/sessions/{session.id}")
    assert again.status_code == 404
    missing_set = await raw.call("POST", f"{SETS}/999/sessions", json={"ownerName": "x"})
    assert missing_set.status_code == 404
    assert "RunnerScaleSetNotFoundException" in missing_set.json()["typeName"]


async def test_long_poll_blocks_then_202_and_wakes_early_on_a_job(raw):
    raw.sim.set_poll_timeout(0.6)
    scale_set_id = await raw.create_scale_set("poller")
    session = await raw.open_session(scale_set_id)
    started = time.monotonic()
    empty = await session.get()
    waited = time.monotonic() - started
    assert empty.status_code == 202
    assert empty.content == b""
    assert 0.5 <= waited < 2.0
    raw.sim.set_poll_timeout(10.0)
    poll = asyncio.create_task(session.get())
    await asyncio.sleep(0.1)
    assert not poll.done()
    started = time.monotonic()
    job_id = raw.sim.enqueue_job(["poller"])
    response = await poll
    assert time.monotonic() - started < 1.0
    assert response.status_code == 200
    assert job_id in response.json()["body"]


async def test_batches_of_at_most_50_with_global_increasing_ids(raw):
    a = await raw.create_scale_set("batch-a")
    b = await raw.create_scale_set("batch-b")
    session_a = await raw.open_session(a)
    session_b = await raw.open_session(b)
    raw.sim.enqueue_jobs(120, ["batch-a"])
    raw.sim.enqueue_jobs(3, ["batch-b"])
    seen: list[int] = []
    sizes: list[int] = []
    last = 0
    for _ in range(3):
        message_id, jobs, stats = await session_a.messages(last)
        assert stats["totalAssignedJobs"] == 120
        sizes.append(len(jobs))
        seen.append(message_id)
        assert (await session_a.delete(message_id)).status_code == 204
        last = message_id
    b_id, b_jobs, _ = await session_b.messages()
    assert sizes == [50, 50, 20]
    assert seen == sorted(seen)
    assert len({*seen, b_id}) == 4
    assert len(b_jobs) == 3
    assert all(j["messageType"] == "JobAssigned" for j in b_jobs)


async def test_unacked_message_is_redelivered_and_last_message_id_acks(raw):
    scale_set_id = await raw.create_scale_set("redeliver")
    session = await raw.open_session(scale_set_id)
    raw.sim.enqueue_job(["redeliver"])
    first, _, _ = await session.messages()
    again, _, _ = await session.messages()
    assert again == first, "not deleted, so delivered again"
    raw.sim.enqueue_job(["redeliver"])
    second, jobs, _ = await session.messages(last=first)
    assert second > first
    assert len(jobs) == 1
    assert raw.sim.snapshot()["scaleSets"][0]["queue"]["messageIds"] == [second]
    assert (await session.delete(second)).status_code == 204
    assert (await session.delete(second)).status_code == 204, "deleting twice is fine"
    raw.sim.set_poll_timeout(0.1)
    assert (await session.get()).status_code == 202


async def test_message_shape_is_double_encoded_with_rfc3339_times(raw):
    scale_set_id = await raw.create_scale_set("shape")
    session = await raw.open_session(scale_set_id)
    job_id = raw.sim.enqueue_job(
        ["shape"], repository="api", owner="acme", display_name="test", event="pull_request"
    )
    _, jobs, stats = await session.messages()
    (job,) = jobs
    assert job["jobId"] == job_id
    assert job["repositoryName"] == "api"
    assert job["ownerName"] == "acme"
    assert job["jobWorkflowRef"] == "acme/api/.github/workflows/ci.yml@refs/heads/main"
    assert job["eventName"] == "pull_request"
    assert job["jobDisplayName"] == "test"
    assert job["requestLabels"] == ["shape"]
    assert job["runnerAssignTime"] == "0001-01-01T00:00:00Z"
    assert job["queueTime"].endswith("Z")
    assert isinstance(job["runnerRequestId"], int)
    assert job["runnerRequestId"] > 0
    assert set(stats) == {
        "totalAvailableJobs",
        "totalAcquiredJobs",
        "totalAssignedJobs",
        "totalRunningJobs",
        "totalRegisteredRunners",
        "totalBusyRunners",
        "totalIdleRunners",
    }


async def test_capacity_header_caps_assigned_plus_running(raw):
    scale_set_id = await raw.create_scale_set("capped")
    session = await raw.open_session(scale_set_id)
    raw.sim.set_poll_timeout(0.1)
    assert (await session.get(capacity=2)).status_code == 202
    raw.sim.enqueue_jobs(5, ["capped"])
    message_id, jobs, stats = await session.messages(capacity=2)
    assert len(jobs) == 2
    assert stats["totalAssignedJobs"] == 2
    assert raw.sim.stats()["jobs"]["queued"] == 3
    raw.sim.complete_job(jobs[0]["jobId"], "canceled")
    message_id, jobs, stats = await session.messages(last=message_id, capacity=2)
    kinds = [j["messageType"] for j in jobs]
    assert kinds == ["JobCompleted", "JobAssigned"]
    assert stats["totalAssignedJobs"] == 2


async def test_invalid_capacity_or_last_message_id_is_400(raw):
    scale_set_id = await raw.create_scale_set("bad-input")
    session = await raw.open_session(scale_set_id)
    r = await raw.http.get(
        session.mq_url, headers={**session.mq_headers(), "X-ScaleSetMaxCapacity": "lots"}
    )
    assert r.status_code == 400
    r = await raw.http.get(session.mq_url + "&lastMessageId=abc", headers=session.mq_headers())
    assert r.status_code == 400


async def test_labels_must_all_be_in_the_scale_set(raw):
    scale_set_id = await raw.create_scale_set("multi", labels=["linux", "x64", "gpu"])
    session = await raw.open_session(scale_set_id)
    match = raw.sim.enqueue_job(["linux", "GPU"])
    no_match = raw.sim.enqueue_job(["linux", "arm64"])
    _, jobs, _ = await session.messages()
    assert [j["jobId"] for j in jobs] == [match]
    assert raw.sim.job(no_match)["state"] == "queued"


async def test_acquire_mode_offers_to_every_matching_set_and_first_acquirer_wins(raw_acquire):
    raw = raw_acquire
    one = await raw.create_scale_set("one", labels=["shared"])
    two = await raw.create_scale_set("two", labels=["shared"])
    job_id = raw.sim.enqueue_job(["shared"])
    assert raw.sim.job(job_id)["state"] == "queued", "no session yet: nothing offered"
    s1 = await raw.open_session(one)
    s2 = await raw.open_session(two)
    assert s1.body["statistics"]["totalAvailableJobs"] == 1
    id1, jobs1, stats1 = await s1.messages()
    _, jobs2, _ = await s2.messages()
    assert [j["messageType"] for j in jobs1] == ["JobAvailable"]
    assert [j["messageType"] for j in jobs2] == ["JobAvailable"]
    assert jobs1[0]["acquireJobUrl"].endswith(f"/runnerscalesets/{one}/acquirejobs")
    assert stats1["totalAvailableJobs"] == 1
    acquirable = await raw.call("GET", f"{SETS}/{two}/acquirablejobs")
    assert acquirable.json()["value"][0]["runnerRequestId"] == jobs2[0]["runnerRequestId"]
    request_id = jobs1[0]["runnerRequestId"]
    won = await s2.acquire([request_id, 424242])
    lost = await s1.acquire([request_id])
    assert won.json() == {"count": 1, "value": [request_id]}
    assert lost.json() == {"count": 0, "value": []}
    _, jobs2, _ = await s2.messages(last=0)
    assert [j["messageType"] for j in jobs2] == ["JobAvailable"], "first message not deleted yet"
    await s1.delete(id1)
    assert (await raw.call("GET", f"{SETS}/{one}/acquirablejobs")).status_code == 204
    assert raw.sim.job(job_id)["scaleSetId"] == two
    bad = await s1.acquire(["x"])  # type: ignore[list-item]
    assert bad.status_code == 400


async def test_acquire_mode_offers_jobs_left_out_for_capacity_again(raw_acquire):
    """Upstream's listener acquires every id a message offers and never asks again for those
    the answer leaves out, so the service offers them again once the set has room (one new
    JobAvailable per free slot, oldest first) instead of leaving them available forever."""
    raw = raw_acquire
    scale_set_id = await raw.create_scale_set("narrow")
    session = await raw.open_session(scale_set_id)
    first, second, third = (raw.sim.enqueue_job(["narrow"]) for _ in range(3))
    message_id, jobs, stats = await session.messages(capacity=1)
    assert [j["messageType"] for j in jobs] == ["JobAvailable"] * 3
    assert stats["totalAvailableJobs"] == 3
    offered = {j["jobId"]: j["runnerRequestId"] for j in jobs}
    await session.delete(message_id)
    acquired = await session.acquire(list(offered.values()))
    assert acquired.json() == {"count": 1, "value": [offered[first]]}
    message_id, jobs, stats = await session.messages(last=message_id, capacity=1)
    assert [(j["messageType"], j["jobId"]) for j in jobs] == [("JobAssigned", first)]
    assert stats["totalAvailableJobs"] == 2, "the two left out are still available"
    assert raw.sim.job(second)["state"] == "available"

    raw.sim.complete_job(first)
    message_id, jobs, stats = await session.messages(last=message_id, capacity=1)
    assert [(j["messageType"], j["jobId"]) for j in jobs] == [
        ("JobCompleted", first),
        ("JobAvailable", second),
    ], "room for one: only the oldest left-out job is offered again"
    assert jobs[1]["runnerRequestId"] == offered[second]
    assert (await session.acquire([offered[second]])).json()["value"] == [offered[second]]

    # A higher capacity header makes room too: the last one is offered again at once.
    message_id, jobs, _ = await session.messages(last=message_id, capacity=2)
    assert [(j["messageType"], j["jobId"]) for j in jobs] == [
        ("JobAssigned", second),
        ("JobAvailable", third),
    ]
    assert (await session.acquire([offered[third]])).json()["value"] == [offered[third]]
    assert raw.sim.job(third)["state"] == "assigned"
    assert raw.sim.job(third)["scaleSetId"] == scale_set_id


async def test_session_statistics_reflect_work_waiting_before_the_session(
    actions_sim: ActionsSimulator, raw
):
    scale_set_id = await raw.create_scale_set("early")
    actions_sim.enqueue_jobs(4, ["early"])
    session = await raw.open_session(scale_set_id)
    assert session.body["statistics"]["totalAssignedJobs"] == 4
    _, jobs, _ = await session.messages()
    assert len(jobs) == 4, "assignments made before the session are delivered to it"
