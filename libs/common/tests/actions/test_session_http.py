"""MessageSessionClient over real HTTP: long poll results, 401 -> refresh -> retry once,
409 conflict retry, open/close."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from arcflow.common.actions import (
    ActionsClient,
    ConflictRetry,
    InvalidResponseError,
    MessageQueueTokenExpiredError,
    SessionConflictError,
)

from .conftest import MQ_TOKEN_PREFIX, FakeGitHub, sequence, session_body, status

pytestmark = pytest.mark.integration

SESSIONS = "_apis/runtime/runnerscalesets/7/sessions"
SESSION = f"{SESSIONS}/6d2bb3a9-1c9b-4a53-9a6e-2d2f5c0c6a10"
MQ = "/mq/7/messages"
ACQUIRE = "_apis/runtime/runnerscalesets/7/acquirejobs"


def install_session(fake: FakeGitHub) -> None:
    """E7 issues MQ token 0, each E8 refresh the next number; E9 answers 204."""
    refreshes = {"n": 0}

    async def create(_r: web.Request) -> web.Response:
        return web.json_response(session_body(0, base_url=fake.base_url))

    async def refresh(_r: web.Request) -> web.Response:
        refreshes["n"] += 1
        return web.json_response(session_body(refreshes["n"], base_url=fake.base_url))

    fake.on("POST", SESSIONS, create)
    fake.on("PATCH", SESSION, refresh)
    fake.on("DELETE", SESSION, sequence(status(204)))


def message(message_id: int, jobs: list[object]) -> dict[str, object]:
    return {
        "messageId": message_id,
        "messageType": "RunnerScaleSetJobMessages",
        "statistics": {"totalAssignedJobs": len(jobs)},
        "body": json.dumps(jobs),
    }


async def test_context_manager_opens_and_closes_the_session(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    async with client.message_session(7, "listener-test") as mq:
        assert mq.session.session_id == "6d2bb3a9-1c9b-4a53-9a6e-2d2f5c0c6a10"
        assert mq.session.statistics is not None
    assert len(fake_github.to("DELETE", SESSION)) == 1
    assert not mq.is_open
    with pytest.raises(RuntimeError, match="not open"):
        _ = mq.session


async def test_get_message_202_200_headers_and_last_message_id(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    jobs = [
        {"messageType": "JobAssigned", "jobId": "j1", "runnerRequestId": 0},
        {"messageType": "SomethingNew", "jobId": "j2"},
        {"messageType": "JobCompleted", "jobId": "j3", "result": "canceled", "runnerId": 0},
    ]

    async def with_bom(_r: web.Request) -> web.Response:
        payload = b"\xef\xbb\xbf" + json.dumps(message(100015779, jobs)).encode()
        return web.Response(status=200, body=payload, content_type="application/json")

    calls: list[int] = []

    async def route(request: web.Request) -> web.StreamResponse:
        calls.append(1)
        if len(calls) == 1:
            return web.Response(status=202)
        if len(calls) == 2:
            return await with_bom(request)
        return web.Response(status=200)  # 200 with an empty body: a protocol error

    fake_github.on("GET", MQ, route)
    async with client.message_session(7, "listener-test") as mq:
        assert await mq.get_message(0, 5) is None
        msg = await mq.get_message(100015778, 5)
        assert msg is not None
        assert msg.message_id == 100015779
        assert [m.message_type for m in msg.job_messages] == ["JobAssigned", "JobCompleted"]
        assert msg.jobs_completed[0].result == "canceled"
        with pytest.raises(InvalidResponseError, match="empty body"):
            await mq.get_message(100015779, 5)

    first, second, _third = fake_github.to("GET", MQ)
    assert first.headers["Authorization"] == f"Bearer {MQ_TOKEN_PREFIX}0"
    assert first.headers["Accept"] == "application/json; api-version=6.0-preview"
    assert first.headers["X-ScaleSetMaxCapacity"] == "5"
    assert "Content-Type" not in first.headers
    assert first.query == {"sessionId": "abc"}  # lastMessageId only when > 0
    assert second.query == {"sessionId": "abc", "lastMessageId": "100015778"}


async def test_401_refreshes_once_then_retries_with_the_new_token(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)

    async def route(request: web.Request) -> web.Response:
        if request.headers["Authorization"] != f"Bearer {MQ_TOKEN_PREFIX}1":
            return web.json_response({"message": "token expired"}, status=401)
        return web.json_response(message(3, []))

    fake_github.on("GET", MQ, route)
    async with client.message_session(7, "listener-test") as mq:
        msg = await mq.get_message(0, 1)
        assert msg is not None
        assert msg.message_id == 3
        assert mq.session.message_queue_access_token.get_secret_value() == f"{MQ_TOKEN_PREFIX}1"
    assert len(fake_github.to("PATCH", SESSION)) == 1
    assert [r.headers["Authorization"] for r in fake_github.to("GET", MQ)] == [
        f"Bearer {MQ_TOKEN_PREFIX}0",
        f"Bearer {MQ_TOKEN_PREFIX}1",
    ]


async def test_second_401_surfaces_token_expired(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    fake_github.on("GET", MQ, sequence(status(401, {"message": "expired"})))
    async with client.message_session(7, "listener-test") as mq:
        with pytest.raises(MessageQueueTokenExpiredError) as info:
            await mq.get_message(0, 1)
    assert info.value.status == 401
    assert len(fake_github.to("GET", MQ)) == 2
    assert len(fake_github.to("PATCH", SESSION)) == 1


async def test_delete_message_needs_204_and_refreshes_on_401(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    fake_github.on("DELETE", f"{MQ}/42", sequence(status(401), status(204), status(200, {})))
    async with client.message_session(7, "listener-test") as mq:
        await mq.delete_message(42)
        with pytest.raises(Exception, match="200 OK"):
            await mq.delete_message(42)
    deletes = fake_github.to("DELETE", f"{MQ}/42")
    assert deletes[0].query == {"sessionId": "abc"}  # /{id} goes on the path, the query stays
    assert deletes[0].headers["Content-Type"] == "application/json"
    assert len(fake_github.to("PATCH", SESSION)) == 1


async def test_acquire_jobs_uses_the_mq_token_on_the_service_url(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    fake_github.on(
        "POST", ACQUIRE, sequence(status(401), status(200, {"count": 1, "value": [1001]}))
    )
    async with client.message_session(7, "listener-test") as mq:
        assert await mq.acquire_jobs([1001, 1002]) == [1001]
    first, second = fake_github.to("POST", ACQUIRE)
    assert first.headers["Authorization"] == f"Bearer {MQ_TOKEN_PREFIX}0"
    assert second.headers["Authorization"] == f"Bearer {MQ_TOKEN_PREFIX}1"
    assert second.json() == [1001, 1002]
    assert second.query == {"api-version": "6.0-preview"}


async def test_concurrent_401s_share_one_refresh(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)

    async def route(request: web.Request) -> web.Response:
        if request.headers["Authorization"] == f"Bearer {MQ_TOKEN_PREFIX}0":
            return web.Response(status=401)
        return web.Response(status=204)

    fake_github.on("DELETE", f"{MQ}/1", route)
    fake_github.on("DELETE", f"{MQ}/2", route)
    async with client.message_session(7, "listener-test") as mq:
        await asyncio.gather(mq.delete_message(1), mq.delete_message(2))
    deletes = fake_github.to("DELETE", f"{MQ}/1") + fake_github.to("DELETE", f"{MQ}/2")
    stale = [d for d in deletes if d.headers["Authorization"] == f"Bearer {MQ_TOKEN_PREFIX}0"]
    assert len(stale) == 2  # both calls saw the expired token ...
    assert len(fake_github.to("PATCH", SESSION)) == 1  # ... and shared one refresh


async def test_conflict_without_retry_fails_at_once(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("POST", SESSIONS, sequence(status(409, {"message": "active session"})))
    with pytest.raises(SessionConflictError):
        async with client.message_session(7, "listener-test"):
            pytest.fail("must not open")
    assert len(fake_github.to("POST", SESSIONS)) == 1


async def test_conflict_retry_waits_then_opens(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    install_session(fake_github)
    opened = fake_github.handlers[("POST", "/tenant/1/" + SESSIONS)]
    conflicts = {"left": 2}

    async def route(request: web.Request) -> web.StreamResponse:
        if conflicts["left"]:
            conflicts["left"] -= 1
            return web.json_response({"message": "active session"}, status=409)
        return await opened(request)

    fake_github.on("POST", SESSIONS, route)
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    retry = ConflictRetry(interval=30.0, attempts=3, sleep=record)
    async with client.message_session(7, "listener-test", retry_conflict=retry) as mq:
        assert mq.is_open
    assert waits == [30.0, 30.0]
    assert len(fake_github.to("POST", SESSIONS)) == 3


async def test_conflict_retry_gives_up_after_attempts(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("POST", SESSIONS, sequence(status(409, {"message": "active session"})))
    retry = ConflictRetry(interval=0.0, attempts=3)
    with pytest.raises(SessionConflictError):
        await client.message_session(7, "listener-test", retry_conflict=retry).open()
    assert len(fake_github.to("POST", SESSIONS)) == 3


async def test_conflict_retry_wait_is_cancellable(
    fake_github: FakeGitHub, client: ActionsClient
) -> None:
    fake_github.on("POST", SESSIONS, sequence(status(409, {"message": "active session"})))
    retry = ConflictRetry(interval=60.0, attempts=10)
    task = asyncio.create_task(
        client.message_session(7, "listener-test", retry_conflict=retry).open()
    )
    for _ in range(200):
        if fake_github.to("POST", SESSIONS):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=2)
    assert len(fake_github.to("POST", SESSIONS)) == 1
