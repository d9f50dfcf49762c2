"""The runner's own side of the simulator (ADR 0091) and arcflow's runner program that speaks
it (``deploy/docker/runner/run.sh``, the runner image's command)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).resolve().parents[4] / "deploy" / "docker" / "runner" / "run.sh"
POOL = "_apis/distributedtask/pools/0"


def _credentials(jit: str) -> dict[str, Any]:
    files = json.loads(base64.b64decode(jit))
    return dict(json.loads(base64.b64decode(files[".credentials"]))["data"])


async def _job_and_runner(raw: Any, name: str, **job: Any) -> tuple[str, str, int]:
    """A scale set with a live listener session, one queued job, one runner's JIT config."""
    scale_set_id = await raw.create_scale_set(name)
    await raw.open_session(scale_set_id)
    job_id = raw.sim.enqueue_job([name], **job)
    created = (await raw.jit(scale_set_id, f"{name}-runner")).json()
    return job_id, created["encodedJITConfig"], int(created["runner"]["id"])


async def _token(raw: Any, jit: str) -> httpx.Response:
    data = _credentials(jit)
    form = {"grant_type": "client_credentials", "client_id": data["clientId"],
            "client_secret": data["clientSecret"]}  # fmt: skip
    return await raw.http.post(data["authorizationUrl"], data=form)


async def test_a_runner_takes_runs_and_completes_its_job_over_http(raw):
    job_id, jit, runner_id = await _job_and_runner(raw, "proto", duration=0.0, result="failed")
    token = (await _token(raw, jit)).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    session = await raw.http.post(raw.url(f"{POOL}/sessions"), headers=auth, json={})
    assert session.status_code == 200, session.text
    session_id = session.json()["sessionId"]
    assert session.json()["agent"]["id"] == runner_id
    query = {"sessionId": session_id}
    message = await raw.http.get(raw.url(f"{POOL}/messages"), headers=auth, params=query)
    assert message.status_code == 200, message.text
    assert message.json()["messageType"] == "RunnerJobRequest"
    body = json.loads(message.json()["body"])
    assert (body["jobId"], body["duration"], body["result"]) == (job_id, 0.0, "failed")
    # The runner reports the end itself: a job duration is not timed by the simulator here.
    assert raw.sim.job(job_id)["state"] == "running"
    assert raw.sim.job(job_id)["runnerId"] == runner_id
    acked = await raw.http.delete(
        raw.url(f"{POOL}/messages/{message.json()['messageId']}"), headers=auth, params=query
    )
    assert acked.status_code == 204
    done = await raw.http.post(
        raw.url(f"_apis/runner/jobs/{job_id}/complete"), headers=auth, json={"result": "failed"}
    )
    assert done.status_code == 200, done.text
    assert raw.sim.job(job_id)["state"] == "completed"
    assert raw.sim.job(job_id)["result"] == "failed"
    # The ephemeral runner left with its job: its token is good for nothing any more.
    again = await raw.http.get(raw.url(f"{POOL}/messages"), headers=auth, params=query)
    assert again.status_code == 401


async def test_runner_side_refusals(raw):
    job_id, jit, _ = await _job_and_runner(raw, "refusals")
    _, other_jit, _ = await _job_and_runner(raw, "others")
    data = _credentials(jit)
    wrong = await raw.http.post(
        data["authorizationUrl"],
        data={"grant_type": "client_credentials", "client_id": data["clientId"],
              "client_secret": "not-it"},
    )  # fmt: skip
    assert wrong.status_code == 401
    assert "not-it" not in wrong.text
    assert data["clientSecret"] not in wrong.text
    no_grant = await raw.http.post(data["authorizationUrl"], data={"client_id": "1"})
    assert no_grant.status_code == 400
    admin = await raw.http.post(raw.url(f"{POOL}/sessions"), headers=raw.auth, json={})
    assert admin.status_code == 401, "the admin token is not a runner's"
    token = (await _token(raw, jit)).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    await raw.http.post(raw.url(f"{POOL}/sessions"), headers=auth, json={})
    stray = await raw.http.get(
        raw.url(f"{POOL}/messages"), headers=auth, params={"sessionId": "nope"}
    )
    assert stray.status_code == 404
    other = (await _token(raw, other_jit)).json()["access_token"]
    theirs = await raw.http.post(
        raw.url(f"_apis/runner/jobs/{job_id}/complete"),
        headers={"Authorization": f"Bearer {other}"},
        json={},
    )
    assert theirs.status_code == 409, "a runner completes only the job it holds"


async def _program(
    sim: ActionsSimulator, jit: str, fault: str = "", **limits: Any
) -> asyncio.subprocess.Process:
    env = {"PATH": os.environ.get("PATH", ""), "ACTIONS_RUNNER_INPUT_JITCONFIG": jit}
    if fault:
        env["ARCFLOW_RUNNER_FAULT"] = fault

    def limit() -> None:
        if "memory" in limits:
            resource.setrlimit(resource.RLIMIT_AS, (limits["memory"], limits["memory"]))

    return await asyncio.create_subprocess_exec(
        sys.executable, str(PROGRAM), env=env, preexec_fn=limit,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


async def test_the_runner_program_runs_its_job_and_exits_0(raw):
    job_id, jit, runner_id = await _job_and_runner(raw, "program", duration=0.2)
    process = await _program(raw.sim, jit)
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    text = output.decode()
    assert process.returncode == 0, text
    job = raw.sim.job(job_id)
    assert (job["state"], job["runnerId"], job["result"]) == ("completed", runner_id, "succeeded")
    assert f"job {job_id} completed" in text
    assert jit not in text
    assert _credentials(jit)["clientSecret"] not in text


async def test_the_runner_program_fault_modes(raw):
    """Test-only faults: it keeps running after completing its job; it allocates memory during
    the job until it is stopped (here an address-space limit, in a pod the memory cgroup)."""
    hang_job, hang_jit, _ = await _job_and_runner(raw, "hang", duration=0.0)
    hog_job, hog_jit, _ = await _job_and_runner(raw, "hog", duration=30.0)
    hang = await _program(raw.sim, hang_jit, "hang-after-job")
    hog = await _program(raw.sim, hog_jit, "oom-during-job", memory=512 << 20)
    try:
        await raw.sim.wait_for_job_state(hang_job, "completed", within=30)
        output, _ = await asyncio.wait_for(hog.communicate(), timeout=60)
        assert hog.returncode != 0, output.decode()
        assert raw.sim.job(hog_job)["state"] == "running", "it died holding its job"
        assert hang.returncode is None, "it keeps running after its job"
    finally:
        for process in (hang, hog):
            if process.returncode is None:
                process.kill()
                await process.wait()
    bad = await _program(raw.sim, hang_jit, "no-such-fault")
    await asyncio.wait_for(bad.wait(), timeout=30)
    assert bad.returncode == 2


async def _wait_output(process: asyncio.subprocess.Process, text: str) -> None:
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), timeout=30)
        assert line, f"the runner exited before printing {text!r}"
        if text in line.decode():
            return


async def test_sigterm_lets_a_running_job_finish_and_an_idle_runner_leave(raw):
    """A pod deleted or evicted: the runner in a job finishes and reports it; one waiting for
    its job leaves at once and is offline, so no job is started on it afterwards."""
    busy_job, busy_jit, _ = await _job_and_runner(raw, "busy", duration=1.0)
    scale_set_id = await raw.create_scale_set("idle")
    await raw.open_session(scale_set_id)
    idle = (await raw.jit(scale_set_id, "idle-runner")).json()
    busy = await _program(raw.sim, busy_jit)
    waiting = await _program(raw.sim, idle["encodedJITConfig"])
    await _wait_output(busy, "running job")
    await _wait_output(waiting, "waiting for its job")
    busy.terminate()
    waiting.terminate()
    for process in (busy, waiting):
        code = await asyncio.wait_for(process.wait(), timeout=30)
        assert process.stdout is not None
        assert code == 0, (await process.stdout.read()).decode(errors="replace")
    assert raw.sim.job(busy_job)["state"] == "completed"
    assert raw.sim.job(busy_job)["result"] == "succeeded"
    late = raw.sim.enqueue_job(["idle"])
    runner = next(r for r in raw.sim.snapshot()["runners"] if r["id"] == idle["runner"]["id"])
    assert (runner["status"], runner["jobId"]) == ("configured", None)
    assert raw.sim.job(late)["state"] == "assigned", "not started on the runner that left"
