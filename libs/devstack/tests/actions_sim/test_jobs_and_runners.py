"""JIT configs, the runner registry and the job state machine (spec §6.3, §6.6)."""

from __future__ import annotations

import asyncio

import pytest

from arcflow.devstack.actions_sim import ActionsSimulator, JitConfigError

pytestmark = pytest.mark.integration

AGENTS = "_apis/distributedtask/pools/0/agents"


async def test_jit_config_registry_and_agent_errors(raw):
    scale_set_id = await raw.create_scale_set("jit")
    created = await raw.jit(scale_set_id, "runner-ab12cd34")
    assert created.status_code == 200
    runner = created.json()["runner"]
    assert runner["name"] == "runner-ab12cd34"
    assert runner["runnerScaleSetId"] == scale_set_id
    assert created.json()["encodedJITConfig"]
    duplicate = await raw.jit(scale_set_id, "runner-ab12cd34")
    assert duplicate.status_code == 409
    assert "AgentExistsException" in duplicate.json()["typeName"]
    by_id = await raw.call("GET", f"{AGENTS}/{runner['id']}")
    by_name = await raw.call("GET", AGENTS, params={"agentName": "runner-ab12cd34"})
    by_other_name = await raw.call("GET", AGENTS, params={"agentName": "runner-ab12cd3"})
    assert by_id.json() == runner
    assert by_name.json() == {"count": 1, "value": [runner]}
    assert by_other_name.json()["count"] == 0, "exact name match"
    assert (await raw.call("DELETE", f"{AGENTS}/{runner['id']}")).status_code == 204
    missing = await raw.call("GET", f"{AGENTS}/{runner['id']}")
    assert missing.status_code == 404
    assert "AgentNotFoundException" in missing.json()["typeName"]
    assert (await raw.call("DELETE", f"{AGENTS}/{runner['id']}")).status_code == 404
    assert (await raw.jit(999, "x")).status_code == 404
    assert (await raw.jit(scale_set_id, "")).status_code == 400


async def test_runner_name_lookup_is_case_insensitive_like_the_conflict(raw):
    """A client that gets AgentExistsException for a name looks that name up to reuse or remove
    the runner (upstream's client does): the lookup must find the runner the conflict saw."""
    scale_set_id = await raw.create_scale_set("names")
    runner = (await raw.jit(scale_set_id, "Runner-Upper")).json()["runner"]
    conflict = await raw.jit(scale_set_id, "runner-upper")
    assert conflict.status_code == 409
    assert "AgentExistsException" in conflict.json()["typeName"]
    for name in ("runner-upper", "RUNNER-UPPER", "Runner-Upper"):
        found = await raw.call("GET", AGENTS, params={"agentName": name})
        assert found.json() == {"count": 1, "value": [runner]}, name
    other = await raw.call("GET", AGENTS, params={"agentName": "runner-uppe"})
    assert other.json()["count"] == 0


async def test_runner_takes_job_busy_runner_cannot_be_removed_then_goes_away(raw):
    scale_set_id = await raw.create_scale_set("work")
    session = await raw.open_session(scale_set_id)
    job_id = raw.sim.enqueue_job(["work"])
    first, jobs, _ = await session.messages()
    assert [j["messageType"] for j in jobs] == ["JobAssigned"]
    created = (await raw.jit(scale_set_id, "worker-1")).json()
    connection = raw.sim.connect_runner(created["encodedJITConfig"])
    assert connection.job_id == job_id
    busy = await raw.call("DELETE", f"{AGENTS}/{connection.runner_id}")
    assert busy.status_code == 409
    assert "JobStillRunningException" in busy.json()["typeName"]
    second, jobs, stats = await session.messages(last=first)
    (started,) = jobs
    assert started["messageType"] == "JobStarted"
    assert started["runnerId"] == connection.runner_id
    assert started["runnerName"] == "worker-1"
    assert started["runnerAssignTime"] != "0001-01-01T00:00:00Z"
    assert stats["totalRunningJobs"] == 1
    assert stats["totalBusyRunners"] == 1
    assert stats["totalRegisteredRunners"] == 1
    raw.sim.complete_job(job_id, "failed")
    _, jobs, stats = await session.messages(last=second)
    (completed,) = jobs
    assert completed["messageType"] == "JobCompleted"
    assert completed["result"] == "failed"
    assert completed["runnerId"] == connection.runner_id
    assert completed["runnerName"] == "worker-1"
    assert completed["finishTime"] != "0001-01-01T00:00:00Z"
    assert stats["totalAssignedJobs"] == 0
    assert stats["totalRegisteredRunners"] == 0
    gone = await raw.call("GET", f"{AGENTS}/{connection.runner_id}")
    assert gone.status_code == 404, "an ephemeral runner leaves with its job"
    with pytest.raises(JitConfigError):
        raw.sim.connect_runner(created["encodedJITConfig"])


async def test_idle_runner_waits_for_work_and_auto_completes(raw):
    scale_set_id = await raw.create_scale_set("idle")
    session = await raw.open_session(scale_set_id)
    jit = (await raw.jit(scale_set_id, "idle-1")).json()["encodedJITConfig"]
    connection = raw.sim.connect_runner(jit)
    assert connection.job_id is None
    job_id = raw.sim.enqueue_job(["idle"], duration=0.05, result="succeeded")
    done = await raw.sim.wait_for_job_state(job_id, "completed", within=3.0)
    assert done["runnerName"] == "idle-1"
    assert done["result"] == "succeeded"
    _, jobs, _ = await session.messages()
    assert [j["messageType"] for j in jobs] == ["JobAssigned", "JobStarted", "JobCompleted"]


async def test_unstarted_job_is_reassigned_at_most_three_times(raw):
    raw.sim.set_assign_timeout(0.1)
    scale_set_id = await raw.create_scale_set("nobody")
    session = await raw.open_session(scale_set_id)
    job_id = raw.sim.enqueue_job(["nobody"])
    await raw.sim.wait_for_job_state(job_id, "completed", within=3.0)
    _, jobs, stats = await session.messages()
    kinds = [(j["messageType"], j.get("result"), j.get("runnerId")) for j in jobs]
    assert (
        kinds
        == [
            ("JobAssigned", None, None),
            ("JobCompleted", "canceled", 0),
        ]
        * 3
    )
    assert len({j["runnerRequestId"] for j in jobs}) == 3, "each attempt is a new request"
    assert {j["jobId"] for j in jobs} == {job_id}
    assert raw.sim.job(job_id)["attempt"] == 3
    assert stats["totalAssignedJobs"] == 0


async def test_cancel_before_a_runner_reports_runner_id_zero(raw):
    scale_set_id = await raw.create_scale_set("cancel")
    session = await raw.open_session(scale_set_id)
    job_id = raw.sim.enqueue_job(["cancel"])
    queued_elsewhere = raw.sim.enqueue_job(["no-such-label"])
    raw.sim.cancel_job(job_id)
    raw.sim.cancel_job(queued_elsewhere)
    _, jobs, _ = await session.messages()
    assert [(j["messageType"], j.get("runnerId"), j.get("result")) for j in jobs] == [
        ("JobAssigned", None, None),
        ("JobCompleted", 0, "canceled"),
    ]
    with pytest.raises(ValueError, match="already completed"):
        raw.sim.complete_job(job_id)
    with pytest.raises(KeyError):
        raw.sim.complete_job("no-such-job")


async def test_run_runner_connects_waits_runs_and_completes(actions_sim: ActionsSimulator, raw):
    scale_set_id = await raw.create_scale_set("runner-loop")
    jit = (await raw.jit(scale_set_id, "loop-1")).json()["encodedJITConfig"]
    run = asyncio.create_task(actions_sim.run_runner(jit, job_duration=0.05))
    await asyncio.sleep(0.05)
    job_id = actions_sim.enqueue_job(["runner-loop"])
    result = await run
    assert result.job_id == job_id
    assert result.runner_name == "loop-1"
    assert actions_sim.job(job_id)["result"] == "succeeded"
    lonely = (await raw.jit(scale_set_id, "loop-2")).json()["encodedJITConfig"]
    with pytest.raises(TimeoutError):
        await actions_sim.run_runner(lonely, job_wait=0.1)


def test_jit_config_errors_name_no_secret(actions_sim: ActionsSimulator):
    for bad in ("", "not base64!", "eyJ9"):
        with pytest.raises(JitConfigError) as info:
            actions_sim.connect_runner(bad)
        assert bad not in str(info.value) or bad == ""
