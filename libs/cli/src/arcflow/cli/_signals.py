"""Stop a long-running command on SIGINT/SIGTERM/SIGHUP with an orderly shutdown instead of a
trace (SIGHUP: the terminal went away, e.g. a closed window or ``tmux kill-session``; without it
the command died at once and left nats-server and the services running)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """An event that SIGINT, SIGTERM or SIGHUP sets while the block runs; the handlers go after it.

    The command awaits the event and then leaves its ``async with`` blocks, so servers and
    child processes are cleaned up rather than interrupted mid-way.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield stop
    finally:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
