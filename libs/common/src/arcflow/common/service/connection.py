"""The one NATS connection of a service: a FastStream ``NatsBroker`` with clear state logs.

nats-py, left alone, reports a lost server through its default error callback with a full
traceback per attempt. The broker gets our callbacks instead, so an outage reads as one
WARNING line when the connection drops, one INFO line when it is back, and one WARNING line
per distinct asynchronous error (e.g. a permissions violation), never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.aio.client import Client as NatsClient

    from arcflow.common.nats.connection import NatsConnection
    from arcflow.common.nats.settings import NatsSettings

log = logging.getLogger("arcflow.service.nats")

ErrorHook = Callable[[Exception], Awaitable[None]]


class DependencyUnavailableError(RuntimeError):
    """NATS or the Kubernetes API could not be reached while the service was starting."""


def connection_callbacks(
    service: str,
    on_error: ErrorHook | None = None,
    closing: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """nats-py callbacks that log each connection state change as one line (none for the
    disconnect of our own shutdown, when ``closing()`` is true)."""
    state = {"disconnected": False}

    async def disconnected_cb() -> None:
        if closing():
            return
        if not state["disconnected"]:
            state["disconnected"] = True
            log.warning("NATS disconnected; reconnecting", extra={"service": service})

    async def reconnected_cb() -> None:
        state["disconnected"] = False
        log.info("NATS reconnected", extra={"service": service})

    async def closed_cb() -> None:
        log.info("NATS connection closed", extra={"service": service})

    async def error_cb(exc: Exception) -> None:
        if closing() and _is_reconnect_failure(exc):
            # Our own close is under way and a reconnect attempt failed: end nats-py's
            # reconnect loop here. On Python 3.11 ``asyncio.wait_for`` can turn the close's
            # cancellation of that loop into the failed connect's error, which the loop
            # catches and retries for ever (seen: a test's event loop that never closed).
            raise asyncio.CancelledError
        if on_error is not None:
            await on_error(exc)
        if _is_connection_error(exc):
            if not state["disconnected"]:  # one line per outage, not one per attempt
                state["disconnected"] = True
                log.warning(
                    "NATS disconnected; reconnecting",
                    extra={
                        "service": service,
                        "error": type(exc).__name__,
                        "reason": _one_line(exc),
                    },
                )
            return
        if state["disconnected"] and not _is_permission_error(exc):
            return  # reconnect attempts: already reported by the disconnected line
        log.warning(
            "NATS error: %s",
            _one_line(exc),
            extra={"service": service, "error": type(exc).__name__},
        )

    return {
        "disconnected_cb": disconnected_cb,
        "reconnected_cb": reconnected_cb,
        "closed_cb": closed_cb,
        "error_cb": error_cb,
    }


def _is_connection_error(exc: Exception) -> bool:
    """A failed (re)connect attempt: the socket, TLS or the server refusing us."""
    from nats.errors import NoServersError, StaleConnectionError

    return isinstance(exc, OSError | TimeoutError | NoServersError | StaleConnectionError)


def _is_reconnect_failure(exc: Exception) -> bool:
    """A connect attempt that failed, as nats-py's reconnect loop reports it; not nats-py's
    own timeouts (a drain or flush that ran out of time is reported to the callback from the
    call that waited, and must reach its caller as that error, not as a cancellation)."""
    from nats.errors import TimeoutError as NatsTimeoutError

    return _is_connection_error(exc) and not isinstance(exc, NatsTimeoutError)


def _is_permission_error(exc: Exception) -> bool:
    return "permission" in str(exc).lower()


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


async def connect_plain(
    settings: NatsConnection,
    identity: str,
    *,
    on_error: ErrorHook | None = None,
    closing: Callable[[], bool] = lambda: False,
    quiet: bool = False,
    **options: Any,
) -> NatsClient:
    """A plain nats-py connection as ``identity`` (its inbox prefix) with the same state logs
    as the broker's: for a service without subscriptions, which needs no FastStream (the
    watcher, the listener; ADR 0016, ADR 0070) and for short-lived clients
    (:mod:`arcflow.common.service.client`, ADR 0034).

    ``quiet``: no state lines at all, for a command at a terminal that reports the failure
    itself (``on_error`` still sees every error); ``options`` override the connect options.
    """
    import nats

    if quiet:
        callbacks: dict[str, Any] = {"error_cb": _only(on_error)}
    else:
        callbacks = connection_callbacks(identity, on_error, closing)
    return await nats.connect(
        **{
            **settings.connect_options(identity),
            "reconnect_time_wait": 0.5,
            **callbacks,
            **options,
        }
    )


def _only(hook: ErrorHook | None) -> ErrorHook:
    """An ``error_cb`` that hands errors to ``hook`` and logs nothing (nats-py's default
    callback would log a traceback per failed attempt)."""

    async def error_cb(exc: Exception) -> None:
        if hook is not None:
            await hook(exc)

    return error_cb


def make_service_broker(
    settings: NatsSettings,
    identity: str,
    *,
    on_error: ErrorHook | None = None,
    closing: Callable[[], bool] = lambda: False,
    **options: Any,
) -> NatsBroker:
    """A broker that connects as ``identity`` (its inbox prefix) with the logging callbacks.

    It reconnects for ever (``max_reconnect_attempts=-1`` whatever the settings say): only the
    runtime closes it, after its subscribers stopped. FastStream's pull loop fetches again at
    once after ``ConnectionClosedError``, which nats-py raises without suspending, so a
    connection that closed under running subscribers would hold the event loop (ADR 0070).
    """
    from arcflow.common.nats.settings import make_broker

    options.setdefault("reconnect_time_wait", 0.5)
    callbacks = connection_callbacks(identity, on_error, closing)
    forever = settings.model_copy(update={"max_reconnect_attempts": -1})
    return make_broker(forever, identity, **callbacks, **options)
