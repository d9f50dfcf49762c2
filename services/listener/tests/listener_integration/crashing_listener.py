"""``python crashing_listener.py``: the listener process (``python -m arcflow.listener``) with a
fault injected from the test side, so the product has no switch for it (ADR 0082).

``CRASH_AFTER_PUBLISH=<n>``: after the n-th PubAck of a pump (counted per scale set,
re-publishes included) and before the GitHub delete, the process ends with ``os._exit(137)``.
With ``CRASH_BARRIER=<path>`` as well, the pump first writes ``<scale set id> <message id>`` to
that file and holds (the rest of the process keeps running) so the test can SIGKILL it from
outside; it exits by itself after 60 s. The variables are read by this script only.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported for real under __main__, after the listener's import block
    from arcflow.common.events import JobsBatch
    from arcflow.listener.pump import AfterPublishHook

CRASH_AFTER_PUBLISH_ENV = "CRASH_AFTER_PUBLISH"
CRASH_BARRIER_ENV = "CRASH_BARRIER"
CRASH_EXIT_CODE = 137
#: How long a pump holds at the barrier for an outside SIGKILL before exiting by itself.
CRASH_BARRIER_HOLD_SECONDS = 60.0
LOG_LINE = "test fault injection: crashing after the PubAck of message {} (scale set {})"


def crash_hook(after: int, barrier: Path | None) -> AfterPublishHook:
    async def crash(batch: JobsBatch, published: int) -> None:
        if published != after:
            return
        print(LOG_LINE.format(batch.message_id, batch.scale_set_id), file=sys.stderr, flush=True)
        if barrier is not None:
            partial = barrier.with_name(barrier.name + ".partial")
            partial.write_text(f"{batch.scale_set_id} {batch.message_id}\n")
            partial.replace(barrier)
            await asyncio.sleep(CRASH_BARRIER_HOLD_SECONDS)
        os._exit(CRASH_EXIT_CODE)

    return crash


def _main() -> int:
    from arcflow.common.lean import skip_optional_imports

    skip_optional_imports()  # as arcflow.listener's __main__ does, before anything else
    from arcflow.common.service import main
    from arcflow.listener import pump
    from arcflow.listener.service import SERVICE

    after = int(os.environ[CRASH_AFTER_PUBLISH_ENV])
    barrier = os.environ.get(CRASH_BARRIER_ENV)
    pump.after_publish_hook = crash_hook(after, Path(barrier) if barrier else None)
    return main(SERVICE)


if __name__ == "__main__":
    sys.exit(_main())
