"""End-to-end flows of the client against the simulator (spec §3.3-3.4, §4, §6.3)."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.common.actions import (
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    JobStillRunningError,
    RunnerScaleSet,
    SessionConflictError,
)
from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration


async def test_120_jobs_in_batches_of_50_acquired_and_counted(
    actions_sim_acquire: ActionsSimulator, actions_clients_acquire
):
    sim = actions_sim_acquire
    sim.set_poll_timeout(0.3)
    client = actions_clients_acquire.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="bulk", runner_group_id=1))
    async with client.message_session(scale_set.id, "bulk-listener") as mq:
        job_ids = sim.enqueue_jobs(120, ["bulk"])
        last = 0
        batch_sizes: list[int] = []
        available: list[int] = []
        acquired: list[int] = []
        assigned: set[str] = set()
        statistics = None
        while len(assigned) < 120:
            message = await mq.get_message(last, 200)
            assert message is not None, "work is pending, so the poll must not come back empty"
            assert len(message.job_messages) <= 50
            batch_sizes.append(len(message.job_messages))
            last = message.message_id
            await mq.delete_message(message.message_id)  # ack first, as upstream does
            offers = [m for m in message.job_messages if isinstance(m, JobAvailable)]
            available += [m.runner_request_id for m in offers]
            if offers:
                acquired += await mq.acquire_jobs([m.runner_request_id for m in offers])
            assigned |= {m.job_id for m in message.job_messages if isinstance(m, JobAssigned)}
            statistics = message.statistics
        assert await mq.get_message(last, 200) is None
        final = await client.refresh_message_session(scale_set.id, mq.session.session_id)
    assert batch_sizes[:2] == [50, 50], "a backlog is cut into full batches"
    assert all(size <= 50 for size in batch_sizes)
    assert sum(batch_sizes) == 240, "120 JobAvailable, then 120 JobAssigned once acquired"
    assert sorted(acquired) == sorted(available)
    assert len(set(acquired)) == 120
    assert assigned == set(job_ids)
    assert statistics is not None
    assert final.statistics is not None
    assert final.statistics.total_assigned_jobs == 120
    assert final.statistics.total_available_jobs == 0
    assert final.statistics.total_running_jobs == 0
    assert sim.stats()["jobs"]["assigned"] == 120


async def test_capacity_header_limits_what_the_listener_is_given(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="cap", runner_group_id=1))
    async with client.message_session(scale_set.id, "cap-listener") as mq:
        actions_sim.set_poll_timeout(0.1)
        assert await mq.get_message(0, 3) is None
        actions_sim.enqueue_jobs(10, ["cap"])
        message = await mq.get_message(0, 3)
    assert message is not None
    assert message.statistics is not None
    assert len(message.job_messages) == 3
    assert message.statistics.total_assigned_jobs == 3
    assert actions_sim.stats()["jobs"]["queued"] == 7


async def test_second_session_on_a_scale_set_is_a_conflict(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    other = actions_clients.client("app")
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="one", runner_group_id=1))
    async with client.message_session(scale_set.id, "first"):
        with pytest.raises(SessionConflictError) as info:
            await other.create_message_session(scale_set.id, "second")
        assert info.value.status == 409
    async with other.message_session(scale_set.id, "second") as mq:
        assert mq.session.owner_name == "second", "free again once the first one closed"


TOKEN_TTL = 1.0


async def test_expired_queue_token_mid_poll_loses_no_message(
    actions_sim: ActionsSimulator, actions_clients
):
    # A token lives 1 s and each round waits 1 s before its delete, so the delete meets an
    # expired token, refreshes once and retries with a fresh one (a shorter life failed on a
    # loaded machine: the retry after the refresh came later than the fresh token's 0.4 s).
    actions_sim.set_mq_token_ttl(TOKEN_TTL)
    actions_sim.set_poll_timeout(0.2)
    client = actions_clients.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="ttl", runner_group_id=1))
    seen: list[int] = []
    jobs_seen: list[str] = []
    async with client.message_session(scale_set.id, "ttl-listener") as mq:
        tokens = {mq.session.message_queue_access_token.get_secret_value()}
        last = 0
        enqueued: list[str] = []
        for round_ in range(6):
            enqueued += actions_sim.enqueue_jobs(2, ["ttl"])
            if round_ == 2:
                actions_sim.expire_next_mq_token()
            message = await mq.get_message(last, 100)
            assert message is not None
            seen.append(message.message_id)
            jobs_seen += [m.job_id for m in message.job_messages]
            last = message.message_id
            await asyncio.sleep(TOKEN_TTL)  # let the short-lived token run out between polls
            await mq.delete_message(message.message_id)
            tokens.add(mq.session.message_queue_access_token.get_secret_value())
    assert seen == list(range(seen[0], seen[0] + 6)), "ids in order, none skipped"
    assert jobs_seen == enqueued, "every job, in order, none skipped"
    assert len(tokens) >= 3, "the token was refreshed several times"
    assert actions_sim.requests_matching("*/messages", "GET")[0].status == 200
    assert any(r.status == 401 for r in actions_sim.requests_matching("*/messages*"))


async def test_runner_takes_a_job_and_messages_name_it(
    actions_sim: ActionsSimulator, actions_clients
):
    actions_sim.set_poll_timeout(0.3)
    client = actions_clients.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="run", runner_group_id=1))
    async with client.message_session(scale_set.id, "run-listener") as mq:
        job_id = actions_sim.enqueue_job(["run"])
        assigned = await mq.get_message(0, 5)
        assert assigned is not None
        assert isinstance(assigned.job_messages[0], JobAssigned)
        await mq.delete_message(assigned.message_id)
        jit = await client.generate_jit_runner_config(scale_set.id, "runner-7f3a")
        config = jit.encoded_jit_config.get_secret_value()
        runner_task = asyncio.create_task(actions_sim.run_runner(config, job_duration=0.3))
        started = await mq.get_message(assigned.message_id, 5)
        assert started is not None
        assert started.statistics is not None
        (event,) = started.job_messages
        assert isinstance(event, JobStarted)
        assert (event.job_id, event.runner_id, event.runner_name) == (
            job_id,
            jit.runner.id,
            "runner-7f3a",
        )
        assert started.statistics.total_busy_runners == 1
        with pytest.raises(JobStillRunningError):
            await client.remove_runner(jit.runner.id)
        await mq.delete_message(started.message_id)
        run = await runner_task
        completed = await mq.get_message(started.message_id, 5)
    assert run.job_id == job_id
    assert run.result == "succeeded"
    assert completed is not None
    (done,) = completed.job_messages
    assert isinstance(done, JobCompleted)
    assert (done.runner_id, done.runner_name, done.result) == (
        jit.runner.id,
        "runner-7f3a",
        "succeeded",
    )
    assert done.finish_time > done.runner_assign_time > done.scale_set_assign_time
    assert await client.get_runner_by_name("runner-7f3a") is None, "ephemeral runner is gone"


async def test_unclaimed_job_comes_back_canceled_then_reassigned(
    actions_sim: ActionsSimulator, actions_clients
):
    actions_sim.set_assign_timeout(0.1)
    client = actions_clients.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="late", runner_group_id=1))
    async with client.message_session(scale_set.id, "late-listener") as mq:
        job_id = actions_sim.enqueue_job(["late"])
        await asyncio.sleep(0.15)
        message = await mq.get_message(0, 5)
    assert message is not None
    kinds = [type(m).__name__ for m in message.job_messages]
    assert kinds[:3] == ["JobAssigned", "JobCompleted", "JobAssigned"]
    canceled = message.job_messages[1]
    assert isinstance(canceled, JobCompleted)
    assert (canceled.job_id, canceled.result, canceled.runner_id) == (job_id, "canceled", 0)
