"""Where ``arcflow audit`` finds NATS, and what it says when NATS is not there.

Order: ``--nats-url``, then ``ARCFLOW_NATS_URL``, then the connection file of a running
``arcflow dev`` (:mod:`arcflow.devstack.connection_file`), then the settings' default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from arcflow.devstack import connection_file


@dataclass(frozen=True)
class ResolvedUrl:
    url: str | None
    #: The connection file the URL came from (a note for stderr), if any.
    from_file: Path | None = None


def resolve_nats_url(option: str | None, env_file: Path | None = None) -> ResolvedUrl:
    """The URL to use (``None``: the settings' default), and the file it came from."""
    if option:
        return ResolvedUrl(option)
    if os.environ.get(connection_file.NATS_URL):
        return ResolvedUrl(None)  # NatsSettings reads it
    path = env_file or connection_file.default_path()
    values = connection_file.read(path)
    if not values or connection_file.stale(values) or not values.get(connection_file.NATS_URL):
        return ResolvedUrl(None)
    return ResolvedUrl(values[connection_file.NATS_URL], path)


def unreachable_message(url: str, error: BaseException | None) -> str:
    """One line for "no NATS there", then a hint line."""
    reason = f" ({_short(error)})" if error is not None else ""
    return (
        f"cannot reach NATS at {url}{reason}\n"
        f"hint: start the dev stack (scripts/dev.sh) and run audit again (it reads "
        f"{connection_file.default_path()}), or pass --nats-url / export ARCFLOW_NATS_URL"
    )


def _short(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return text.splitlines()[0][:160]


class ErrorRecorder:
    """Holds nats-py's ``error_cb`` (:attr:`callback`), which keeps the last error instead of
    logging a traceback per failed attempt."""

    def __init__(self) -> None:
        self.last: BaseException | None = None

        async def callback(error: Exception) -> None:
            self.last = error

        self.callback = callback


__all__ = ["ErrorRecorder", "ResolvedUrl", "resolve_nats_url", "unreachable_message"]
