"""The kube-apiserver's own CPU profile over a run, for the benchmarks that put it at the bound.

Not a test. With ``ARCFLOW_BENCH_APISERVER_PPROF=<seconds>`` set, :class:`ServerProfile`
asks the server for ``/debug/pprof/profile?seconds=<seconds>`` (Go's sampling CPU profiler,
on by default in kube-apiserver, readable by the admin) when a run's first write is about to
be made, and writes the answer to ``<ARCFLOW_BENCH_APISERVER_PPROF_DIR or
/tmp/arcflow-apiserver-pprof>/<label>-<n>.pb.gz``. The run waits for it before it tears down
or deletes anything, so the window holds the run and not what follows it. Read one with
``go tool pprof -top <kube-apiserver binary> <file>``; ``benchmarks/apiserver_profile.py``
groups two sides' profiles by where the server spends them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

_COUNTER = itertools.count(1)


def window_seconds() -> int | None:
    """The profile's window, or ``None`` when the run is not profiled."""
    value = os.environ.get("ARCFLOW_BENCH_APISERVER_PPROF", "")
    return int(value) if value.strip() else None


class ServerProfile:
    """One CPU profile of the control plane's kube-apiserver; a no-op when not asked for or
    when the run has no real server (the emulator)."""

    def __init__(self, plane: Any, label: str) -> None:
        self._plane = plane
        self._label = label
        self._thread: threading.Thread | None = None
        self._seconds = window_seconds()
        self.path: Path | None = None
        self.error: str | None = None

    def start(self) -> None:
        seconds = self._seconds
        if seconds is None or self._plane is None:
            return
        default = Path(tempfile.gettempdir()) / "arcflow-apiserver-pprof"
        folder = Path(os.environ.get("ARCFLOW_BENCH_APISERVER_PPROF_DIR", default))
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{self._label}-{next(_COUNTER)}-{os.getpid()}.pb.gz"
        plane, target = self._plane, self.path

        def fetch() -> None:
            try:
                path = f"/debug/pprof/profile?seconds={seconds}"
                body = plane.get_bytes(path, timeout=seconds + 30)
                target.write_bytes(body)
            except OSError as exc:  # the run goes on; the result says why there is no profile
                self.error = f"{type(exc).__name__}: {exc}"

        self._thread = threading.Thread(target=fetch, name="apiserver-pprof", daemon=True)
        self._thread.start()

    async def wait(self) -> dict[str, Any] | None:
        """Wait for the window to end; the profile's file (or why there is none) for the result."""
        if self._thread is None:
            return None
        await asyncio.to_thread(self._thread.join)
        return {"window_seconds": self._seconds, "file": str(self.path), "error": self.error}
