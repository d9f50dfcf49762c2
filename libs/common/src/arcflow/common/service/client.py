"""NATS for processes that are not services: CLI commands and the dev stack's event view.

A service gets its one connection from :class:`~arcflow.common.service.runtime.ServiceRuntime`
(a FastStream broker). A short-lived client (``arcflow audit``, the dev stack's event tail)
connects here instead, under the same rules (ADR 0034):

* its own identity, so its own inbox prefix ``_INBOX_<identity>``: the generated NATS
  permissions grant each user only its own inbox (:mod:`arcflow.common.nats.permissions`);
* the connection callbacks of :mod:`arcflow.common.service.connection`: one line per state
  change, never a nats-py traceback per reconnect attempt (``quiet``: no lines at all, for a
  terminal command that reports the failure itself; ``on_error`` still sees every error);
* drained and closed on exit, whatever happened inside the block.

    async with nats_client(settings, "auditor", quiet=True, on_error=errors.callback) as nc:
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from arcflow.common.service.connection import ErrorHook, connect_plain

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient

    from arcflow.common.nats.connection import NatsConnection


@contextlib.asynccontextmanager
async def nats_client(
    settings: NatsConnection,
    identity: str,
    *,
    on_error: ErrorHook | None = None,
    quiet: bool = False,
    **options: Any,
) -> AsyncIterator[NatsClient]:
    """A nats-py connection as ``identity`` for the block (:func:`connect_plain`); ``options``
    override the settings' connect options (e.g. fewer reconnect attempts for a command at a
    terminal).

    Raises what ``nats.connect`` raises (``NoServersError`` when no server answered).
    """
    closing = False
    nc = await connect_plain(
        settings, identity, on_error=on_error, closing=lambda: closing, quiet=quiet, **options
    )
    try:
        yield nc
    finally:
        closing = True
        with contextlib.suppress(Exception):
            await nc.drain()
        with contextlib.suppress(Exception):
            await nc.close()
