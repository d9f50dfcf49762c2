"""``python -m arcflow.watcher``: run the watcher until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from arcflow.common.telemetry import setup_logging, setup_tracing
from arcflow.watcher.service import SERVICE_NAME, serve
from arcflow.watcher.settings import WatcherSettings

log = logging.getLogger("arcflow.watcher")


async def _main(settings: WatcherSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve(settings, stop)


def main() -> int:
    try:
        settings = WatcherSettings()
    except ValueError as exc:
        print(f"arcflow-watcher: invalid settings: {exc}", file=sys.stderr)
        return 2
    setup_logging(SERVICE_NAME, json_output=settings.log_json, level=settings.log_level.upper())
    setup_tracing(SERVICE_NAME)
    try:
        asyncio.run(_main(settings))
    except Exception:
        log.exception("watcher failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
