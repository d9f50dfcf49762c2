"""The dev tooling's child processes, as a kubelet or a supervisor treats them: they die with
their parent, stop with SIGTERM then SIGKILL, and explain a failure by their log's last line."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
from pathlib import Path


def set_parent_death_signal() -> None:  # pragma: no cover - runs in the child
    """Linux: the child gets SIGTERM if its parent dies (even by SIGKILL): no orphans."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


async def terminate(process: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (what a kubelet does on pod deletion)."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def last_log_line(path: Path, limit: int = 200) -> str:
    """The last non-blank line of a log file, at most ``limit`` characters of its end."""
    with contextlib.suppress(OSError):
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
        if lines:
            return lines[-1][-limit:]
    return ""
