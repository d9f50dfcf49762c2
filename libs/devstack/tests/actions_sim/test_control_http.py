"""The ``/_sim`` control API over HTTP: what the dev stack's fake runner pods use."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration


async def test_credentials_groups_jobs_and_a_runner_over_http(raw):
    sim: ActionsSimulator = raw.sim
    http = raw.http
    ctl = f"{sim.base_url}/_sim"
    pat = await http.post(f"{ctl}/pats", json={"token": "ghp_for_sim_only"})
    app = await http.post(f"{ctl}/apps")
    group = await http.post(f"{ctl}/runner-groups", json={"name": "arm"})
    assert pat.json() == {"token": "ghp_for_sim_only"}
    assert {"app_id", "client_id", "installation_id", "private_key"} <= set(app.json())
    assert "BEGIN PRIVATE KEY" in app.json()["private_key"]
    assert group.status_code == 201
    assert group.json()["name"] == "arm"
    scale_set_id = await raw.create_scale_set("ctl")
    jit = (await raw.jit(scale_set_id, "ctl-runner")).json()["encodedJITConfig"]
    run = asyncio.create_task(
        http.post(f"{ctl}/runners/run", json={"jit_config": jit, "job_duration": 0.05})
    )
    queued = await http.post(
        f"{ctl}/jobs", json={"labels": ["ctl"], "repository": "svc", "count": 2}
    )
    job_ids = queued.json()["job_ids"]
    assert len(job_ids) == 2
    ran = (await run).json()
    assert ran["job_id"] == job_ids[0]
    assert ran["runner_name"] == "ctl-runner"
    listed = (await http.get(f"{ctl}/jobs", params={"state": "completed"})).json()["jobs"]
    assert [j["jobId"] for j in listed] == [job_ids[0]]
    second = (await raw.jit(scale_set_id, "ctl-runner-2")).json()["encodedJITConfig"]
    connected = await http.post(f"{ctl}/runners/connect", json={"jit_config": second})
    assert connected.json()["job_id"] == job_ids[1]
    done = await http.post(f"{ctl}/jobs/{job_ids[1]}/complete", json={"result": "failed"})
    assert done.json()["result"] == "failed"
    assert done.json()["state"] == "completed"
    stats = (await http.get(f"{ctl}/stats")).json()
    assert stats["jobs"]["completed"] == 2
    assert stats["scale_sets"] == 1
    snapshot = (await http.get(f"{ctl}/snapshot")).json()
    assert snapshot["scaleSets"][0]["name"] == "ctl"


async def test_fault_and_settings_routes(raw):
    http, ctl = raw.http, f"{raw.sim.base_url}/_sim"
    added = await http.post(
        f"{ctl}/faults/status",
        json={"route": "*/runnerscalesets", "status": 500, "times": 1, "method": "GET"},
    )
    assert added.status_code == 201
    assert added.json()["rules"][0]["status"] == 500
    assert (await raw.call("GET", "_apis/runtime/runnerscalesets")).status_code == 500
    for kind, body in [
        ("expire-mq-token", {"times": 2}),
        ("empty-message-body", {}),
        ("empty-queue-url", {}),
        ("nil-session-id", {"times": 2}),
        ("bom", {"enabled": True}),
        ("slow-polls", {"delay": 0.01}),
        ("drop-polls", {"times": 3, "after": 0.1}),
        ("session-conflict", {}),
        ("session-refresh-404", {}),
        ("runner-registration", {"status": 401, "times": 2}),
        ("text-plain", {"route": "*/agents"}),
        ("zero-request-ids", {}),
        ("admin-token-ttl", {"seconds": 30}),
    ]:
        r = await http.post(f"{ctl}/faults/{kind}", json=body)
        assert r.status_code == 201, (kind, r.text)
    described = (await http.get(f"{ctl}/faults")).json()
    assert described["expire_mq_calls"] == 2
    assert described["nil_session_ids"] == 2
    assert described["bom"] is True
    assert described["dropped_polls"] == 3
    assert raw.sim.tokens.admin_token_ttl == 30
    cleared = await http.delete(f"{ctl}/faults")
    assert cleared.json()["rules"] == []
    assert cleared.json()["bom"] is False
    assert cleared.json()["nil_session_ids"] == 0
    assert cleared.json()["dropped_polls"] == 0
    settings = await http.patch(
        f"{ctl}/settings", json={"poll_timeout": 0.5, "assign_timeout": None, "mq_token_ttl": 60}
    )
    assert settings.json()["poll_timeout"] == 0.5
    assert settings.json()["assign_timeout"] is None
    requests = (await http.get(f"{ctl}/requests", params={"route": "*/runnerscalesets"})).json()
    assert [r["status"] for r in requests["requests"]] == [500]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/jobs", {"labels": "linux"}, 400),
        ("POST", "/jobs", {"labels": []}, 400),
        ("POST", "/jobs", {"labels": ["x"], "count": 0}, 400),
        ("POST", "/jobs", {"labels": ["x"], "duration": "long"}, 400),
        ("GET", "/jobs/nope", None, 404),
        ("POST", "/jobs/nope/complete", {}, 404),
        ("POST", "/runners/connect", {"jit_config": "garbage"}, 400),
        ("POST", "/runner-groups", {"name": ""}, 400),
        ("POST", "/faults/unknown", {}, 404),
        ("POST", "/faults/status", {"route": "*", "status": 9000}, 400),
        ("PATCH", "/settings", {"poll_timeout": -1}, 400),
        ("PATCH", "/settings", {"colour": "blue"}, 400),
    ],
)
async def test_bad_control_input_gets_a_clear_error(
    actions_sim: ActionsSimulator, method: str, path: str, body: object, status: int
):
    async with httpx.AsyncClient() as http:
        r = await http.request(method, f"{actions_sim.base_url}/_sim{path}", json=body)
        health = await http.get(f"{actions_sim.base_url}/_sim/health")
    assert r.status_code == status
    assert r.json()["error"]
    assert health.json()["status"] == "ok", "nothing else breaks"


async def test_not_json_control_body(actions_sim: ActionsSimulator):
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{actions_sim.base_url}/_sim/jobs", content=b"{nope")
    assert r.status_code == 400
    assert "JSON" in r.json()["error"]


async def test_no_secret_reaches_logs_snapshot_or_repr(raw, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    sim: ActionsSimulator = raw.sim
    app = sim.add_github_app()
    scale_set_id = await raw.create_scale_set("secret")
    session = await raw.open_session(scale_set_id)
    jit = (await raw.jit(scale_set_id, "secret-runner")).json()["encodedJITConfig"]
    sim.connect_runner(jit)
    await raw.call("GET", "_apis/runtime/runnerscalesets")
    dumped = caplog.text + repr(sim.snapshot()) + repr(sim.stats()) + repr(app) + repr(sim)
    dumped += repr(sim.tokens) + repr(list(sim.requests))
    for secret in (raw.admin, session.token, jit, app.private_key):
        assert secret not in dumped
    assert app.private_key not in repr(app)


async def test_a_scale_set_deleted_behind_the_controllers_back(raw):
    """``DELETE /_sim/scalesets/{id}``: the session and idle runners go, a job running keeps
    its runner and finishes, a job not started goes back to the queue with the same attempt;
    the service then answers 404 for the id."""
    sim: ActionsSimulator = raw.sim
    http, ctl = raw.http, f"{sim.base_url}/_sim"
    scale_set_id = await raw.create_scale_set("behind")
    await raw.open_session(scale_set_id)
    busy_jit = (await raw.jit(scale_set_id, "busy")).json()["encodedJITConfig"]
    idle_jit = (await raw.jit(scale_set_id, "idle")).json()["encodedJITConfig"]
    running, waiting = (
        await http.post(f"{ctl}/jobs", json={"labels": ["behind"], "count": 2})
    ).json()["job_ids"]
    taken = await http.post(f"{ctl}/runners/connect", json={"jit_config": busy_jit})
    assert taken.json()["job_id"] == running
    assert sim.job(waiting)["state"] == "assigned"

    deleted = await http.delete(f"{ctl}/scalesets/{scale_set_id}")
    assert deleted.status_code == 200
    assert deleted.json() == {"deleted": scale_set_id}
    gone = await raw.call("GET", f"_apis/runtime/runnerscalesets/{scale_set_id}")
    assert gone.status_code == 404
    assert scale_set_id not in sim.engine.scale_sets
    assert sim.job(running)["state"] == "running"
    assert sim.job(waiting)["state"] == "queued"
    assert sim.engine.job(waiting).attempt == 1
    idle = await http.post(f"{ctl}/runners/connect", json={"jit_config": idle_jit})
    assert idle.status_code == 400  # the idle runner went with the set
    done = await http.post(f"{ctl}/jobs/{running}/complete")
    assert done.json()["state"] == "completed"
    again = await http.delete(f"{ctl}/scalesets/{scale_set_id}")
    assert again.status_code == 404
    bad = await http.delete(f"{ctl}/scalesets/not-a-number")
    assert bad.status_code == 400
