"""Each simulator fault and the client's reaction to it (spec §5, §6.7), over real HTTP."""

from __future__ import annotations

import pytest

from arcflow.common.actions import (
    ActionsError,
    ConflictRetry,
    GitHubAPIError,
    InvalidResponseError,
    MessageQueueTokenExpiredError,
    NilSessionError,
    RetriesExhaustedError,
    RetryPolicy,
    RunnerScaleSet,
    SessionConflictError,
)
from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration

SETS = "*/_apis/runtime/runnerscalesets"


class RecordingSleep:
    """Records the waits the retry policy asks for, without waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def recording_policy(max_retries: int = 4) -> tuple[RetryPolicy, RecordingSleep]:
    sleep = RecordingSleep()
    return RetryPolicy(max_retries=max_retries, sleep=sleep), sleep


async def new_scale_set(client, name: str) -> int:
    created = await client.create_runner_scale_set(RunnerScaleSet(name=name, runner_group_id=1))
    return created.id


async def test_5xx_is_retried_with_backoff_then_succeeds(
    actions_sim: ActionsSimulator, actions_clients
):
    policy, sleep = recording_policy()
    client = actions_clients.client(retry=policy)
    actions_sim.inject_status(SETS, 500, times=3, method="POST")
    created = await client.create_runner_scale_set(RunnerScaleSet(name="retry", runner_group_id=1))
    assert created.name == "retry"
    assert [r.status for r in actions_sim.requests_matching(SETS, "POST")] == [500, 500, 500, 200]
    assert sleep.waits == [1.0, 2.0, 4.0]


async def test_retries_exhausted_after_five_attempts(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    await client.get_runner_group_by_name("Default")
    actions_sim.inject_status(SETS, 503, times=5, method="GET")
    with pytest.raises(RetriesExhaustedError) as info:
        await client.get_runner_scale_set(1, "x")
    assert "giving up after 5 attempt(s)" in str(info.value)
    assert len(actions_sim.requests_matching(SETS, "GET")) == 5


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_overrides_the_backoff(
    actions_sim: ActionsSimulator, actions_clients, status: int
):
    policy, sleep = recording_policy()
    client = actions_clients.client(retry=policy)
    await client.get_runner_group_by_name("Default")
    actions_sim.inject_status("*/runnergroups/", status, times=2, retry_after=37)
    group = await client.get_runner_group_by_name("Default")
    assert group.id == 1
    assert sleep.waits == [37.0, 37.0], "Retry-After wins and is not capped"


async def test_mq_401_refreshes_the_session_once(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "mq-refresh")
    async with client.message_session(scale_set_id, "listener") as mq:
        first_token = mq.session.message_queue_access_token.get_secret_value()
        job_id = actions_sim.enqueue_job(["mq-refresh"])
        actions_sim.expire_next_mq_token()
        message = await mq.get_message(0, 5)
        assert message is not None
        assert message.job_messages[0].job_id == job_id
        assert mq.session.message_queue_access_token.get_secret_value() != first_token
        assert len(actions_sim.requests_matching("*/sessions/*", "PATCH")) == 1
        actions_sim.expire_next_mq_token()
        await mq.delete_message(message.message_id)
        actions_sim.expire_next_mq_token()
        assert await mq.acquire_jobs([]) == []
        assert len(actions_sim.requests_matching("*/sessions/*", "PATCH")) == 3


async def test_second_401_in_a_row_surfaces(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "mq-twice")
    async with client.message_session(scale_set_id, "listener") as mq:
        actions_sim.expire_next_mq_token(times=2)
        with pytest.raises(MessageQueueTokenExpiredError) as info:
            await mq.get_message(0, 5)
        assert info.value.status == 401
        assert len(actions_sim.requests_matching("*/sessions/*", "PATCH")) == 1


async def test_refresh_answering_404_is_an_error(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "refresh-404")
    async with client.message_session(scale_set_id, "listener") as mq:
        actions_sim.expire_next_mq_token()
        actions_sim.fail_session_refresh()
        with pytest.raises(ActionsError) as info:
            await mq.get_message(0, 5)
        assert info.value.status == 404
        assert "RunnerAdminException" in info.value.type_name


async def test_bom_is_stripped_everywhere(actions_sim: ActionsSimulator, actions_clients):
    actions_sim.set_bom()
    client = actions_clients.client("app")
    scale_set_id = await new_scale_set(client, "bom")
    async with client.message_session(scale_set_id, "listener") as mq:
        actions_sim.enqueue_job(["bom"])
        message = await mq.get_message(0, 5)
    assert message is not None
    assert len(message.job_messages) == 1
    actions_sim.set_bom(False)


async def test_empty_200_message_body_is_a_clear_error(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "empty-body")
    async with client.message_session(scale_set_id, "listener") as mq:
        actions_sim.empty_message_body()
        with pytest.raises(InvalidResponseError, match="200"):
            await mq.get_message(0, 5)


async def test_empty_message_queue_url_is_a_clear_error(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "empty-url")
    actions_sim.empty_message_queue_url()
    with pytest.raises(InvalidResponseError, match="empty messageQueueUrl"):
        await client.create_message_session(scale_set_id, "listener")


async def test_nil_session_id_is_refused(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "nil-session")
    actions_sim.nil_session_id()
    with pytest.raises(NilSessionError, match="nil UUID"):
        async with client.message_session(scale_set_id, "listener"):
            pass
    async with client.message_session(scale_set_id, "listener") as mq:  # the next one works
        assert mq.session.session_id != "00000000-0000-0000-0000-000000000000"


async def test_short_admin_token_ttl_refreshes_before_every_call(
    actions_sim: ActionsSimulator, actions_clients
):
    actions_sim.set_admin_token_ttl(30)
    client = actions_clients.client("app")
    for _ in range(3):
        await client.get_runner_group_by_name("Default")
    assert len(actions_sim.requests_matching("*/runner-registration")) == 3
    assert len(actions_sim.requests_matching("*/access_tokens")) == 3, "no token caching"
    actions_sim.set_admin_token_ttl(3600)
    for _ in range(3):
        await client.get_runner_group_by_name("Default")
    assert len(actions_sim.requests_matching("*/runner-registration")) == 4


@pytest.mark.parametrize("status", [401, 403])
async def test_runner_registration_401_403_are_retried(
    actions_sim: ActionsSimulator, actions_clients, status: int
):
    policy, sleep = recording_policy()
    client = actions_clients.client(retry=policy)
    actions_sim.fail_runner_registration(status, times=3)
    assert (await client.get_runner_group_by_name("Default")).id == 1
    statuses = [r.status for r in actions_sim.requests_matching("*/runner-registration")]
    assert statuses == [status] * 3 + [201]
    assert sleep.waits == [1.0, 2.0, 4.0]


async def test_runner_registration_failing_every_attempt_reports_its_body(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    actions_sim.fail_runner_registration(401, times=5)
    with pytest.raises(GitHubAPIError) as info:
        await client.get_runner_group_by_name("Default")
    assert info.value.status == 401
    assert "Bad credentials" in str(info.value)
    assert len(actions_sim.requests_matching("*/runner-registration")) == 5


async def test_session_create_409_and_opt_in_conflict_retry(
    actions_sim: ActionsSimulator, actions_clients
):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "conflict-fault")
    actions_sim.conflict_session_create()
    with pytest.raises(SessionConflictError):
        await client.create_message_session(scale_set_id, "listener")
    sleep = RecordingSleep()
    actions_sim.conflict_session_create(times=2)
    retrying = client.message_session(
        scale_set_id, "listener", retry_conflict=ConflictRetry(interval=30, attempts=3, sleep=sleep)
    )
    async with retrying as mq:
        assert mq.session.session_id
    assert sleep.waits == [30, 30]


async def test_text_plain_400_keeps_the_raw_text(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "plain")
    actions_sim.text_plain_errors("*/generatejitconfig")
    with pytest.raises(ActionsError) as info:
        await client.generate_jit_runner_config(scale_set_id, "r-1")
    assert info.value.status == 400
    assert "Bad request (plain text from the simulator)" in str(info.value)
    assert info.value.activity_id, "the ActivityId header reaches the error"


async def test_slow_polls_still_deliver(actions_sim: ActionsSimulator, actions_clients):
    client = actions_clients.client()
    scale_set_id = await new_scale_set(client, "slow")
    actions_sim.set_slow_polls(0.2)
    async with client.message_session(scale_set_id, "listener") as mq:
        actions_sim.enqueue_job(["slow"])
        message = await mq.get_message(0, 5)
    assert message is not None
    assert len(message.job_messages) == 1
