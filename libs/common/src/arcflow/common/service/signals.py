"""Signal handling of every arcflow process: the one place arcflow processes handle signals.

A service (``main(spec)``) stops on SIGTERM/SIGINT; a long-running CLI command
(``arcflow dev``, ``arcflow sim …``) adds SIGHUP (the terminal went away: a closed window or
``tmux kill-session``; without it the command died at once and left nats-server and the
services running). The process awaits the stop event and then leaves its ``async with`` blocks,
so servers and child processes are cleaned up rather than interrupted mid-way.

Kept apart from the runtime so a command at a terminal can use it without importing anything
else of the skeleton.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Final

#: What stops a service (the orchestrator's SIGTERM, a developer's Ctrl-C).
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
#: What stops a command at a terminal: also the terminal going away.
COMMAND_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stop_on_signals(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> Iterator[asyncio.Event]:
    """An event that any of ``signals`` sets while the block runs (in the running loop); the
    handlers are removed after it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield stop
    finally:
        for signum in signals:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)


async def run_until_signalled(run: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Await ``run(stop)``; SIGTERM or SIGINT sets ``stop`` (the handlers are removed after)."""
    with stop_on_signals(STOP_SIGNALS) as stop:
        await run(stop)
