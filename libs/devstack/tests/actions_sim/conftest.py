"""Raw-HTTP helpers for the simulator's own tests (httpx, no Actions client in between)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from arcflow.devstack.actions_sim import ActionsSimulator


class RawService:
    """Walks the token chain by hand and keeps the admin token, as a client would."""

    def __init__(self, sim: ActionsSimulator, http: httpx.AsyncClient) -> None:
        self.sim = sim
        self.http = http
        self.svc = ""
        self.admin = ""

    async def login(self, org: str = "example-org") -> None:
        pat = self.sim.add_pat()
        reg = await self.http.post(
            f"{self.sim.api_url}/orgs/{org}/actions/runners/registration-token",
            headers={"Authorization": f"Bearer {pat}"},
        )
        assert reg.status_code == 201, reg.text
        conn = await self.http.post(
            f"{self.sim.api_url}/actions/runner-registration",
            headers={"Authorization": f"RemoteAuth {reg.json()['token']}"},
            json={"url": self.sim.config_url(org), "runner_event": "register"},
        )
        assert conn.status_code == 201, conn.text
        self.svc, self.admin = conn.json()["url"], conn.json()["token"]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin}"}

    def url(self, path: str) -> str:
        return f"{self.svc}{path}"

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.auth, **kwargs.pop("headers", {})}
        params = {"api-version": "6.0-preview", **kwargs.pop("params", {})}
        return await self.http.request(
            method, self.url(path), headers=headers, params=params, **kwargs
        )

    async def create_scale_set(
        self, name: str, labels: list[str] | None = None, **extra: Any
    ) -> int:
        body: dict[str, Any] = {
            "name": name,
            "runnerGroupId": 1,
            "RunnerSetting": {"disableUpdate": True},
            "createdOn": "0001-01-01T00:00:00Z",
            **extra,
        }
        if labels is not None:
            body["labels"] = [{"name": x, "type": "System"} for x in labels]
        response = await self.call("POST", "_apis/runtime/runnerscalesets", json=body)
        assert response.status_code == 200, response.text
        return int(response.json()["id"])

    async def open_session(self, scale_set_id: int, owner: str = "listener") -> Session:
        response = await self.call(
            "POST",
            f"_apis/runtime/runnerscalesets/{scale_set_id}/sessions",
            json={"sessionId": "00000000-0000-0000-0000-000000000000", "ownerName": owner},
        )
        assert response.status_code == 200, response.text
        return Session(self, scale_set_id, response.json())

    async def jit(self, scale_set_id: int, name: str) -> httpx.Response:
        return await self.call(
            "POST",
            f"_apis/runtime/runnerscalesets/{scale_set_id}/generatejitconfig",
            json={"name": name, "workFolder": ""},
        )


class Session:
    def __init__(self, service: RawService, scale_set_id: int, body: dict[str, Any]) -> None:
        self.service = service
        self.scale_set_id = scale_set_id
        self.body = body
        self.id: str = body["sessionId"]
        self.mq_url: str = body["messageQueueUrl"]
        self.token: str = body["messageQueueAccessToken"]

    def mq_headers(self, capacity: int = 100) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.token}",
            "X-ScaleSetMaxCapacity": str(capacity),
            "Accept": "application/json; api-version=6.0-preview",
        }

    async def get(self, last: int = 0, capacity: int = 100) -> httpx.Response:
        params = {"lastMessageId": str(last)} if last > 0 else {}
        return await self.service.http.get(
            self.mq_url, headers=self.mq_headers(capacity), params=params
        )

    async def messages(
        self, last: int = 0, capacity: int = 100
    ) -> tuple[int, list[dict[str, Any]], dict[str, int]]:
        """GET one message and return (id, job messages, statistics); asserts 200."""
        response = await self.get(last, capacity)
        assert response.status_code == 200, (response.status_code, response.text)
        envelope = response.json()
        assert envelope["messageType"] == "RunnerScaleSetJobMessages"
        assert isinstance(envelope["body"], str)
        return envelope["messageId"], json.loads(envelope["body"]), envelope["statistics"]

    async def delete(self, message_id: int) -> httpx.Response:
        base, _, query = self.mq_url.partition("?")
        return await self.service.http.delete(
            f"{base}/{message_id}?{query}", headers={"Authorization": f"Bearer {self.token}"}
        )

    async def acquire(self, ids: list[int]) -> httpx.Response:
        return await self.service.http.post(
            self.service.url(f"_apis/runtime/runnerscalesets/{self.scale_set_id}/acquirejobs"),
            params={"api-version": "6.0-preview"},
            headers={"Authorization": f"Bearer {self.token}"},
            json=ids,
        )


@pytest.fixture
async def raw(actions_sim: ActionsSimulator) -> AsyncIterator[RawService]:
    async with httpx.AsyncClient(timeout=30.0) as http:
        service = RawService(actions_sim, http)
        await service.login()
        yield service


@pytest.fixture
async def raw_acquire(actions_sim_acquire: ActionsSimulator) -> AsyncIterator[RawService]:
    async with httpx.AsyncClient(timeout=30.0) as http:
        service = RawService(actions_sim_acquire, http)
        await service.login()
        yield service
