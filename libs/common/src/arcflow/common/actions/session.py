"""The message session of one scale set: long poll, ack, acquire
(docs/upstream-behaviour.md#listener-session).

The message-queue token is refreshed only when the service rejects it (401): one PATCH of the
session, then the same call once more. Concurrent callers that hit the same expired token share
one refresh.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, TypeVar

from arcflow.common.actions.errors import MessageQueueTokenExpiredError, SessionConflictError
from arcflow.common.actions.models import MessageSession, RunnerScaleSetMessage
from arcflow.common.actions.retry import Sleep

logger = logging.getLogger("arcflow.actions")

T = TypeVar("T")


class SessionApi(Protocol):
    """What a session needs from the Actions client (``ActionsClient`` provides it); the
    session does not import the client, so the two modules form no cycle."""

    async def create_message_session(self, scale_set_id: int, owner: str) -> MessageSession: ...

    async def refresh_message_session(
        self, scale_set_id: int, session_id: str
    ) -> MessageSession: ...

    async def delete_message_session(self, scale_set_id: int, session_id: str) -> None: ...

    async def mq_get_message(
        self, session: MessageSession, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None: ...

    async def mq_delete_message(self, session: MessageSession, message_id: int) -> None: ...

    async def mq_acquire_jobs(
        self, scale_set_id: int, session: MessageSession, request_ids: list[int]
    ) -> list[int]: ...


@dataclass(frozen=True)
class ConflictRetry:
    """Opt-in retry of session creation on 409 (a stale session of a crashed listener).

    ``attempts`` counts creation attempts (10 means 9 waits of ``interval``). Cancelling the
    task during a wait stops it at once.
    """

    interval: float = 30.0
    attempts: int = 10
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")
        if self.interval < 0:
            raise ValueError("interval must be >= 0")


class MessageSessionClient:
    """An open message session; ``async with`` opens it (E7) and closes it (E9)."""

    def __init__(
        self,
        client: SessionApi,
        scale_set_id: int,
        owner: str,
        *,
        retry_conflict: ConflictRetry | None = None,
    ) -> None:
        if scale_set_id <= 0:
            raise ValueError("scale_set_id must be a positive integer")
        if not owner:
            raise ValueError("owner must not be empty")
        self._client = client
        self._scale_set_id = scale_set_id
        self._owner = owner
        self._retry_conflict = retry_conflict
        self._session: MessageSession | None = None
        self._refresh_lock = asyncio.Lock()

    def __repr__(self) -> str:
        session_id = self._session.session_id if self._session else None
        return (
            f"MessageSessionClient(scale_set_id={self._scale_set_id}, owner={self._owner!r}, "
            f"session_id={session_id!r})"
        )

    @property
    def scale_set_id(self) -> int:
        return self._scale_set_id

    @property
    def session(self) -> MessageSession:
        if self._session is None:
            raise RuntimeError("message session is not open")
        return self._session

    @property
    def is_open(self) -> bool:
        return self._session is not None

    async def open(self) -> MessageSession:
        """Create the session (E7), waiting out 409 conflicts if ``retry_conflict`` allows."""
        if self._session is not None:
            return self._session
        attempts = self._retry_conflict.attempts if self._retry_conflict else 1
        for attempt in range(1, attempts + 1):
            try:
                session = await self._client.create_message_session(self._scale_set_id, self._owner)
            except SessionConflictError:
                if self._retry_conflict is None or attempt == attempts:
                    raise
                logger.warning(
                    "scale set %d already has an active message session; "
                    "retrying in %.1fs (attempt %d of %d)",
                    self._scale_set_id,
                    self._retry_conflict.interval,
                    attempt,
                    attempts,
                )
                await self._retry_conflict.sleep(self._retry_conflict.interval)
                continue
            self._session = session
            logger.info(
                "opened message session %s for scale set %d (owner %s)",
                session.session_id,
                self._scale_set_id,
                self._owner,
            )
            return session
        raise AssertionError("unreachable: the conflict loop always returns or raises")

    async def _refresh(self, stale: MessageSession) -> None:
        """E8 once per expired token, however many calls saw the 401."""
        async with self._refresh_lock:
            if self._session is not stale:
                return  # another caller already refreshed
            logger.info(
                "message queue token of session %s expired; refreshing the session",
                stale.session_id,
            )
            self._session = await self._client.refresh_message_session(
                self._scale_set_id, stale.session_id
            )

    async def _with_token_refresh(self, call: Callable[[MessageSession], Awaitable[T]]) -> T:
        session = self.session
        try:
            return await call(session)
        except MessageQueueTokenExpiredError:
            await self._refresh(session)
        return await call(self.session)

    async def get_message(
        self, last_message_id: int, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        """E10 long poll (the service holds it ~50 s). ``None`` means no message (202).

        ``max_capacity`` goes in ``X-ScaleSetMaxCapacity`` so the service does not assign more
        jobs than we can run.
        """
        if max_capacity < 0:
            raise ValueError("max_capacity must be >= 0")
        if last_message_id < 0:
            raise ValueError("last_message_id must be >= 0")
        return await self._with_token_refresh(
            lambda s: self._client.mq_get_message(s, last_message_id, max_capacity)
        )

    async def delete_message(self, message_id: int) -> None:
        """E11, the ack: an unacknowledged message is redelivered."""
        await self._with_token_refresh(lambda s: self._client.mq_delete_message(s, message_id))

    async def acquire_jobs(self, request_ids: list[int]) -> list[int]:
        """E12: returns the runner request ids actually acquired (maybe a subset)."""
        ids = list(request_ids)
        return await self._with_token_refresh(
            lambda s: self._client.mq_acquire_jobs(self._scale_set_id, s, ids)
        )

    async def close(self) -> None:
        """Delete the session (E9). Idempotent; after it the client can be opened again."""
        session = self._session
        if session is None:
            return
        await self._client.delete_message_session(self._scale_set_id, session.session_id)
        self._session = None
        logger.info(
            "closed message session %s for scale set %d", session.session_id, self._scale_set_id
        )

    async def __aenter__(self) -> MessageSessionClient:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.close()
            return
        try:
            await self.close()
        except Exception as close_error:
            # Do not mask the error that is already propagating.
            logger.warning(
                "failed to close message session for scale set %d: %s",
                self._scale_set_id,
                close_error,
            )
