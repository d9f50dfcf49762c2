"""Signal handling of every arcflow process: SIGTERM/SIGINT set a stop event.

Kept apart from the runtime so a light process (the listener, ADR 0016) can use it without
importing anything else of the skeleton.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def run_until_signalled(run: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Await ``run(stop)``; SIGTERM or SIGINT sets ``stop`` (the handlers are removed after)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        await run(stop)
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
