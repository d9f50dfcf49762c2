"""Every endpoint through ``arcflow.common.actions`` against the simulator over real HTTP.

Both credential kinds walk the whole token chain (spec §1); E1-E17 are checked for their
success shape and their typed errors (§2, §5.2).
"""

from __future__ import annotations

import uuid

import pytest

from arcflow.common.actions import (
    AmbiguousResultError,
    JobStillRunningError,
    Label,
    RunnerExistsError,
    RunnerGroupNotFoundError,
    RunnerNotFoundError,
    RunnerScaleSet,
    RunnerSetting,
    ScaleSetNotFoundError,
)
from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("auth", ["pat", "app"])
async def test_scale_set_lifecycle_e1_to_e6(actions_sim: ActionsSimulator, actions_clients, auth):
    actions_sim.add_runner_group("gpu pool")
    client = actions_clients.client(auth)
    default = await client.get_runner_group_by_name("Default")
    assert default.id == 1
    assert default.is_default_group
    gpu = await client.get_runner_group_by_name("gpu pool")
    assert gpu.id > 1
    with pytest.raises(RunnerGroupNotFoundError):
        await client.get_runner_group_by_name("absent")
    created = await client.create_runner_scale_set(
        RunnerScaleSet(
            name="linux x64",
            runner_group_id=gpu.id,
            labels=[Label(name="linux x64"), Label(name="extra")],
            runner_setting=RunnerSetting(disable_update=True),
        )
    )
    assert created.id > 0
    assert created.runner_group_name == "gpu pool"
    assert [(lb.type, lb.name) for lb in created.labels] == [
        ("System", "linux x64"),
        ("System", "extra"),
    ]
    assert created.runner_setting.disable_update is True
    assert created.statistics is not None
    by_name = await client.get_runner_scale_set(gpu.id, "linux x64")
    assert by_name is not None
    assert by_name.id == created.id
    assert await client.get_runner_scale_set(1, "linux x64") is None, "other group"
    by_id = await client.get_runner_scale_set_by_id(created.id)
    assert by_id is not None
    assert by_id.name == "linux x64"
    updated = await client.update_runner_scale_set(created.id, RunnerScaleSet(name="renamed"))
    assert updated.name == "renamed"
    assert updated.runner_group_id == gpu.id
    await client.delete_runner_scale_set(created.id)
    with pytest.raises(ScaleSetNotFoundError):
        await client.get_runner_scale_set_by_id(created.id)
    with pytest.raises(ScaleSetNotFoundError):
        await client.delete_runner_scale_set(created.id)
    registrations = actions_sim.requests_matching("*/runner-registration")
    assert [r.status for r in registrations] == [201], "one admin token serves every call"
    if auth == "app":
        assert len(actions_sim.requests_matching("*/access_tokens")) == 1


@pytest.mark.parametrize("auth", ["pat", "app"])
async def test_sessions_messages_jit_and_runners_e7_to_e17(
    actions_sim: ActionsSimulator, actions_clients, auth
):
    client = actions_clients.client(auth)
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="e7", runner_group_id=1))
    session = await client.create_message_session(scale_set.id, "owner-1")
    assert session.session_id
    assert session.statistics is not None
    assert session.runner_scale_set is not None
    assert session.runner_scale_set.id == scale_set.id
    refreshed = await client.refresh_message_session(scale_set.id, session.session_id)
    assert refreshed.session_id == session.session_id
    await client.delete_message_session(scale_set.id, session.session_id)

    actions_sim.set_poll_timeout(0.3)
    async with client.message_session(scale_set.id, "owner-2") as mq:
        assert await mq.get_message(0, 10) is None, "202 after the long poll"
        job_id = actions_sim.enqueue_job(["e7"])
        message = await mq.get_message(0, 10)
        assert message is not None
        assert message.statistics is not None
        assert message.statistics.total_assigned_jobs == 1
        assert [m.job_id for m in message.job_messages] == [job_id]
        await mq.delete_message(message.message_id)
        assert await mq.acquire_jobs([]) == []
    assert actions_sim.stats()["sessions"] == 0, "leaving the context closed the session"

    assert await client.get_acquirable_jobs(scale_set.id) == [], "204 is empty"
    jit = await client.generate_jit_runner_config(scale_set.id, "runner-e14", work_folder="/w")
    assert jit.runner.name == "runner-e14"
    assert jit.runner.runner_scale_set_id == scale_set.id
    assert jit.encoded_jit_config.get_secret_value()
    with pytest.raises(RunnerExistsError):
        await client.generate_jit_runner_config(scale_set.id, "runner-e14")
    runner = await client.get_runner(jit.runner.id)
    assert runner is not None
    assert runner.name == "runner-e14"
    found = await client.get_runner_by_name("runner-e14")
    assert found is not None
    assert found.id == jit.runner.id
    assert await client.get_runner_by_name("runner-e1") is None
    actions_sim.connect_runner(jit.encoded_jit_config.get_secret_value())
    assert actions_sim.job(job_id)["runnerName"] == "runner-e14"
    with pytest.raises(JobStillRunningError):
        await client.remove_runner(jit.runner.id)
    actions_sim.complete_job(job_id)
    with pytest.raises(RunnerNotFoundError):
        await client.get_runner(jit.runner.id)
    with pytest.raises(RunnerNotFoundError):
        await client.remove_runner(jit.runner.id)
    idle = await client.generate_jit_runner_config(scale_set.id, "runner-idle")
    await client.remove_runner(idle.runner.id)
    assert await client.get_runner_by_name("runner-idle") is None


async def test_acquirable_jobs_e13_in_acquire_mode(actions_sim_acquire, actions_clients_acquire):
    client = actions_clients_acquire.client()
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name="ghes", runner_group_id=1))
    async with client.message_session(scale_set.id, "ghes-listener"):
        actions_sim_acquire.enqueue_job(["ghes"], repository="api", owner="acme")
        jobs = await client.get_acquirable_jobs(scale_set.id)
    assert len(jobs) == 1
    assert jobs[0].repository_name == "api"
    assert jobs[0].owner_name == "acme"
    assert jobs[0].runner_request_id > 0
    assert jobs[0].request_labels == ["ghes"]


async def test_repo_and_enterprise_config_urls(actions_sim: ActionsSimulator, actions_clients):
    repo = actions_clients.client(config_url=actions_sim.repo_config_url("acme", "api"))
    enterprise = actions_clients.client(config_url=actions_sim.enterprise_config_url("corp"))
    assert (await repo.get_runner_group_by_name("Default")).id == 1
    assert (await enterprise.get_runner_group_by_name("Default")).id == 1
    paths = [r.path for r in actions_sim.requests_matching("*/registration-token")]
    assert paths == [
        "/api/v3/repos/acme/api/actions/runners/registration-token",
        "/api/v3/enterprises/corp/actions/runners/registration-token",
    ]


async def test_ambiguous_runner_group_name_is_refused(
    actions_sim: ActionsSimulator, actions_clients
):
    # Group names are unique in the simulator, so two sets with one name in two groups stand
    # in for "count > 1" on E2 when the group filter is 0.
    second = actions_sim.add_runner_group("second")
    client = actions_clients.client()
    await client.create_runner_scale_set(RunnerScaleSet(name="twin", runner_group_id=1))
    await client.create_runner_scale_set(RunnerScaleSet(name="twin", runner_group_id=second.id))
    with pytest.raises(AmbiguousResultError) as caught:
        await client.get_runner_scale_set(0, "twin")
    # As upstream's: the answer's status and ids, in the text and as attributes.
    error = caught.value
    assert error.status == 200
    assert uuid.UUID(error.activity_id)  # the simulator's ActivityId header
    assert error.request_id
    text = str(error)
    assert 'status="200 OK"' in text
    assert f'activity_id="{error.activity_id}"' in text
    assert f'github_request_id="{error.request_id}"' in text
    assert "multiple runner scale sets found with name 'twin'" in text
    lookups = actions_sim.requests_matching("*/runnerscalesets", "GET")
    assert [r.status for r in lookups] == [200]  # refused once, not retried
