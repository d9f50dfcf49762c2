"""What a stuck or growing service is doing, for an operator (issue 33, ADR 0086): a stack
dump of every thread and asyncio task, and the lines that hold the most memory
(``tracemalloc``). Served on the health port as ``/debug/stacks`` and ``/debug/memory`` only
when the service's ``profiling`` setting is on (off by default: ``tracemalloc`` costs memory
and time on every allocation once it traces). Code locations only: no variable's value, so
no secret, appears in either.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import traceback
import tracemalloc

#: Frames kept per allocation: the line that allocated and its callers, for the top.
TRACE_FRAMES = 1


def start_tracing() -> None:
    """Start ``tracemalloc`` (a no-op when it already traces)."""
    if not tracemalloc.is_tracing():
        tracemalloc.start(TRACE_FRAMES)


def stack_dump() -> str:
    """Every thread's stack, then every asyncio task of the running loop with its stack."""
    out = io.StringIO()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        out.write(f"--- thread {names.get(ident, '?')} ({ident})\n")
        out.write("".join(traceback.format_stack(frame)))
    try:
        tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    except RuntimeError:  # no running loop
        tasks = []
    out.write(f"--- {len(tasks)} asyncio task(s)\n")
    for task in tasks:
        out.write(f"--- task {task.get_name()}\n")
        task.print_stack(file=out)
    return out.getvalue()


def memory_top(limit: int = 25) -> str:
    """The ``limit`` source lines holding the most memory now, biggest first."""
    if not tracemalloc.is_tracing():
        return "tracemalloc is not tracing (profiling is off)\n"
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__),)
    )
    stats = snapshot.statistics("lineno")
    total = sum(stat.size for stat in stats)
    lines = [f"total traced: {total / 1024:.1f} KiB in {len(stats)} line(s)"]
    for stat in stats[: max(1, limit)]:
        where = stat.traceback[0]
        lines.append(f"{stat.size / 1024:10.1f} KiB {stat.count:8d} blocks  {where}")
    return "\n".join(lines) + "\n"


__all__ = ["memory_top", "stack_dump", "start_tracing"]
