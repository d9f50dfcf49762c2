"""The token chain and the three-token model (spec §1, §6.8.5-6), over raw HTTP."""

from __future__ import annotations

import asyncio
import base64
import time

import httpx
import jwt
import pytest

from arcflow.devstack.actions_sim import ActionsSimulator

pytestmark = pytest.mark.integration


def app_jwt(private_key: str, issuer: str | int, *, lifetime: int = 540, age: int = 60) -> str:
    now = int(time.time())
    claims = {"iat": now - age, "exp": now - age + lifetime, "iss": str(issuer)}
    return jwt.encode(claims, private_key, algorithm="RS256")


async def test_pat_chain_yields_svc_url_and_admin_jwt_with_exp(actions_sim: ActionsSimulator):
    async with httpx.AsyncClient() as http:
        pat = actions_sim.add_pat()
        for path in (
            "/orgs/example-org",
            "/repos/example-org/repo",
            "/enterprises/example-enterprise",
        ):
            reg = await http.post(
                f"{actions_sim.api_url}{path}/actions/runners/registration-token",
                headers={"Authorization": f"Bearer {pat}"},
            )
            assert reg.status_code == 201
            assert reg.json()["token"]
            assert reg.json()["expires_at"].endswith("Z")
        conn = await http.post(
            f"{actions_sim.api_url}/actions/runner-registration",
            headers={"Authorization": f"RemoteAuth {reg.json()['token']}"},
            json={"url": actions_sim.enterprise_config_url(), "runner_event": "register"},
        )
    assert conn.status_code == 201
    body = conn.json()
    assert body["url"] == f"{actions_sim.base_url}/tenant/1/"
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert claims["exp"] > time.time() + 3000


async def test_github_app_jwt_is_verified_against_the_app_key(actions_sim: ActionsSimulator):
    app = actions_sim.add_github_app()
    other = actions_sim.add_github_app()
    url = f"{actions_sim.api_url}/app/installations/{app.installation_id}/access_tokens"
    async with httpx.AsyncClient() as http:
        good = await http.post(
            url, headers={"Authorization": f"Bearer {app_jwt(app.private_key, app.app_id)}"}
        )
        by_client_id = await http.post(
            url, headers={"Authorization": f"Bearer {app_jwt(app.private_key, app.client_id)}"}
        )
        wrong_key = await http.post(
            url, headers={"Authorization": f"Bearer {app_jwt(other.private_key, app.app_id)}"}
        )
        expired = await http.post(
            url,
            headers={"Authorization": f"Bearer {app_jwt(app.private_key, app.app_id, age=900)}"},
        )
        too_long = await http.post(
            url,
            headers={
                "Authorization": f"Bearer {app_jwt(app.private_key, app.app_id, lifetime=3600)}"
            },
        )
        foreign_installation = await http.post(
            f"{actions_sim.api_url}/app/installations/{other.installation_id}/access_tokens",
            headers={"Authorization": f"Bearer {app_jwt(app.private_key, app.app_id)}"},
        )
        token = good.json()["token"]
        org_reg = await http.post(
            f"{actions_sim.api_url}/orgs/example-org/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {token}"},
        )
        ent_reg = await http.post(
            f"{actions_sim.api_url}/enterprises/e/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert good.status_code == 201
    assert by_client_id.status_code == 201
    assert wrong_key.status_code == 401
    assert expired.status_code == 401
    assert too_long.status_code == 401
    assert foreign_installation.status_code == 404
    assert org_reg.status_code == 201
    assert ent_reg.status_code == 403, "an App cannot register enterprise runners"


async def test_each_token_kind_only_works_on_its_own_endpoints(raw):
    scale_set_id = await raw.create_scale_set("three-tokens")
    session = await raw.open_session(scale_set_id)
    http, sim = raw.http, raw.sim
    pat = sim.add_pat()
    # PAT and admin JWT are not registration tokens.
    for token in (pat, raw.admin):
        r = await http.post(
            f"{sim.api_url}/actions/runner-registration",
            headers={"Authorization": f"RemoteAuth {token}"},
            json={"url": sim.config_url()},
        )
        assert r.status_code == 401
    # Bearer on runner-registration is refused too.
    r = await http.post(
        f"{sim.api_url}/actions/runner-registration",
        headers={"Authorization": f"Bearer {pat}"},
        json={"url": sim.config_url()},
    )
    assert r.status_code == 401
    # The MQ token and the PAT do not open admin calls.
    for token in (session.token, pat, "garbage"):
        r = await http.get(
            raw.url(f"_apis/runtime/runnerscalesets/{scale_set_id}"),
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 401
    # The admin token does not open the queue or acquirejobs.
    r = await http.get(session.mq_url, headers={"Authorization": f"Bearer {raw.admin}"})
    assert r.status_code == 401
    r = await http.post(
        raw.url(f"_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs"),
        headers={"Authorization": f"Bearer {raw.admin}"},
        json=[],
    )
    assert r.status_code == 401
    # An MQ token is bound to its own scale set.
    other = await raw.create_scale_set("other-set")
    r = await http.post(
        raw.url(f"_apis/runtime/runnerscalesets/{other}/acquirejobs"),
        headers={"Authorization": f"Bearer {session.token}"},
        json=[],
    )
    assert r.status_code == 401


async def test_expired_admin_and_mq_tokens_get_401(actions_sim: ActionsSimulator, raw):
    scale_set_id = await raw.create_scale_set("ttl")
    actions_sim.set_admin_token_ttl(0.3)
    actions_sim.set_mq_token_ttl(0.3)
    await raw.login()
    session = await raw.open_session(scale_set_id)
    claims = jwt.decode(raw.admin, options={"verify_signature": False})
    assert claims["exp"] - time.time() < 60
    await asyncio.sleep(0.5)  # let both tokens expire
    r = await raw.call("GET", f"_apis/runtime/runnerscalesets/{scale_set_id}")
    assert r.status_code == 401
    assert r.json()["typeName"].startswith("GitHub.Services.WebApi.VssUnauthorizedException")
    r = await session.get()
    assert r.status_code == 401


async def test_every_response_carries_activity_and_request_ids(raw):
    responses = [
        await raw.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "Default"}),
        await raw.call("GET", "_apis/runtime/runnerscalesets/999"),
        await raw.http.get(raw.url("_apis/runtime/runnergroups/")),
        await raw.http.get(f"{raw.sim.base_url}/no/such/route"),
    ]
    assert [r.status_code for r in responses] == [200, 404, 401, 404]
    for response in responses:
        assert response.headers["ActivityId"]
        assert response.headers["X-GitHub-Request-Id"]
    assert len({r.headers["ActivityId"] for r in responses}) == len(responses)


@pytest.mark.parametrize("header", ["", "Bearer", "Basic abc", "RemoteAuth"])
async def test_malformed_authorization_is_refused(actions_sim: ActionsSimulator, header: str):
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{actions_sim.api_url}/actions/runner-registration",
            headers={"Authorization": header} if header else {},
            json={"url": "x"},
        )
    assert r.status_code == 401
    assert r.json()["message"] == "Bad credentials"


async def test_a_pat_as_the_basic_auth_password_opens_the_registration_token(
    actions_sim: ActionsSimulator,
):
    """GitHub REST takes a token as the password of Basic auth (upstream ARC 0.27's client
    sends its PAT so); a wrong password or a Basic header with no password does not."""
    pat = actions_sim.add_pat()
    url = f"{actions_sim.api_url}/orgs/example-org/actions/runners/registration-token"
    async with httpx.AsyncClient() as http:
        good = await http.post(url, auth=("github", pat))
        any_user = await http.post(url, auth=("someone", pat))
        wrong = await http.post(url, auth=("github", "not-a-pat"))
        no_password = await http.post(
            url, headers={"Authorization": "Basic " + base64.b64encode(pat.encode()).decode()}
        )
        garbage = await http.post(url, headers={"Authorization": "Basic %%%"})
    assert good.status_code == 201
    assert good.json()["token"]
    assert any_user.status_code == 201
    assert [r.status_code for r in (wrong, no_password, garbage)] == [401, 401, 401]
    assert wrong.json()["message"] == "Bad credentials"
