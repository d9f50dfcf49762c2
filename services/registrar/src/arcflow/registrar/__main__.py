"""``python -m arcflow.registrar``: run one registrar replica until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal

from arcflow.registrar.app import run
from arcflow.registrar.settings import RegistrarSettings


async def _main() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run(RegistrarSettings(), stop_event=stop)


def main() -> None:
    asyncio.run(_main())


if __name__ == "__main__":
    main()
