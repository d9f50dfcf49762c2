"""The result file the listener benchmarks write: machine, load before and after, settings,
and one record per run (docs/benchmarks/ cites these files)."""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any


def loadavg() -> list[str]:
    """The 1, 5 and 15 minute load averages, as the kernel prints them."""
    with open("/proc/loadavg") as handle:
        return handle.read().split()[:3]


def wait_quiet(below: float = 2.5, within: float = 600.0) -> list[str]:
    """Wait (bounded) until the 1-minute load is under ``below``, the project's rule for a run's
    start; returns the load averages then (a run that starts above it says so in its result)."""
    deadline = time.monotonic() + within
    while float(loadavg()[0]) >= below and time.monotonic() < deadline:
        time.sleep(5)
    return loadavg()


def write_runs(
    out: str | Path,
    benchmark: str,
    *,
    label: str,
    started: float,
    load_before: list[str],
    settings: dict[str, Any],
    runs: list[Any],
) -> Path:
    """Write ``runs`` (dataclasses) with the load now as "after"; returns the path."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": benchmark,
        "label": label,
        "started_at": started,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "settings": settings,
        "runs": [asdict(r) for r in runs],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {path}")
    return path
