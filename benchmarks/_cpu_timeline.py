"""Who used the two cores, and when: CPU seconds of every process of a run, sampled over time.

Not a test. :class:`CpuTimeline` samples, every ``interval`` seconds, the CPU seconds (user +
system, from ``/proc/<pid>/stat``) of this benchmark process and of every process under it
(the control plane, nats-server, the services, the listener and its runners' stand-ins), by
name: ``python -m arcflow.<x>`` counts as ``arcflow.<x>``, ``python <script>`` as the
script, anything else by its program's name, this process as ``benchmark`` (the Actions
simulator, the pod runner, the watches).
``between(t0, t1)`` gives each name's CPU seconds over a window of the run (a process that
ended inside it counts up to its last sample), so a benchmark can say how busy the machine
was until, say, every runner pod existed, and which process was busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import defaultdict

from _stack import CLK_TCK


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _name(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return "?"
    if not argv:
        return "?"
    program = os.path.basename(argv[0])
    if program.startswith("python") and len(argv) > 1:  # ``-m module`` or a script's name
        return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else os.path.basename(argv[1])
    return program


def sample(root: int) -> dict[int, tuple[str, float]]:
    """Every live process under ``root`` (itself included): pid -> (name, CPU seconds)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(entry)
            if stat is not None:
                parents[int(entry)], cpu[int(entry)] = stat
    out: dict[int, tuple[str, float]] = {}
    for pid in cpu:
        walk, depth = pid, 0
        while walk not in (root, 0, 1) and depth < 64:
            walk, depth = parents.get(walk, 0), depth + 1
        if walk == root:
            out[pid] = ("benchmark" if pid == root else _name(str(pid)), cpu[pid])
    return out


def used_since(before: dict[int, tuple[str, float]], root: int) -> dict[str, float]:
    """CPU seconds by name since ``before`` (a :func:`sample` of the same ``root``), of the
    processes alive now; one born since counts from 0."""
    by_name: dict[str, float] = defaultdict(float)
    for pid, (name, cpu) in sample(root).items():
        by_name[name] += cpu - (before[pid][1] if pid in before else 0.0)
    return {k: round(v, 2) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])}


class CpuTimeline:
    """``start()``, run, ``await stop()``, then ``between(t0, t1)`` (wall-clock times)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[tuple[float, dict[int, tuple[str, float]]]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        root = os.getpid()
        while True:
            self.samples.append((time.time(), await asyncio.to_thread(sample, root)))
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self.samples.append((time.time(), sample(os.getpid())))

    def _at(self, when: float) -> tuple[float, dict[int, tuple[str, float]]]:
        """The last sample at or before ``when`` (the first one if none is)."""
        chosen = self.samples[0]
        for taken in self.samples:
            if taken[0] > when:
                break
            chosen = taken
        return chosen

    def between(self, t0: float, t1: float) -> dict[str, object]:
        """CPU seconds by name over [t0, t1] (to the samples' resolution), their sum, and how
        many of the machine's cores that sum kept busy on average."""
        if not self.samples:
            return {}
        (s0, first), (s1, _) = self._at(t0), self._at(t1)
        # Every process seen in the window, from its CPU at the window's start (0 if it was
        # born inside it) to its last sample in the window (it may have ended inside it).
        ending: dict[int, tuple[str, float]] = {}
        for taken, processes in self.samples:
            if s0 <= taken <= s1:
                ending.update(processes)
        by_name: dict[str, float] = defaultdict(float)
        for pid, (name, cpu) in ending.items():
            by_name[name] += cpu - (first[pid][1] if pid in first else 0.0)
        total = sum(by_name.values())
        wall = max(s1 - s0, 1e-9)
        return {
            "window_seconds": round(wall, 2),
            "cpu_seconds": {
                k: round(v, 2) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])
            },
            "cpu_seconds_total": round(total, 2),
            "cores_busy": round(total / wall, 2),
            "cores": os.cpu_count(),
        }
