"""Benchmark: what a service process costs before it does anything (issue 31 goal 5, ADR 0125).

Not a test. For each service (watcher, registrar, reconciler) and each side, a fresh
``python`` imports what ``python -m arcflow.<service>`` imports before it connects: its
``__main__`` module (which, since ADR 0125, blocks the optional imports first) and the modules
the runtime imports when it starts (health endpoint, subscribers, metrics, FastStream's NATS
broker, nats-py's client). It reports the process's peak RSS (``ru_maxrss``), its CPU seconds
(user + system) and how many modules it loaded.

``--before-rev REV`` puts that revision's ``libs/common/src`` and ``services/*/src`` (from
``git archive``) first on the path of the "before" side; "after" is this checkout. Sides
alternate run by run; each side's bytecode is compiled by a discarded warm-up first (an image
compiles at build), in a cache of its own.

    .venv/bin/python benchmarks/import_footprint.py --before-rev 718e384 --runs 3

Each result also holds ``attribution``: one fresh process per service imports, in this order,
the interpreter's start, pydantic, pydantic-settings (with the standard library it brings:
asyncio, ssl, email), httpx, nats-py, OpenTelemetry's metrics SDK and Prometheus exporter,
FastStream's NATS broker, and the service's own modules, and reports the RSS each step adds
(VmRSS from /proc; a library counted at its first import, so the order matters).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SERVICES = ("watcher", "registrar", "reconciler")

PROBE = """
import resource, sys, time
import arcflow.{service}.__main__
import arcflow.common.health, arcflow.common.service.subscribers
import arcflow.common.telemetry.metrics, faststream.nats, nats.aio.client
usage = resource.getrusage(resource.RUSAGE_SELF)
loaded = [m for m, mod in sys.modules.items() if mod is not None]
print(usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, len(loaded),
      int("aiohttp" in sys.modules and sys.modules["aiohttp"] is not None))
"""


ATTRIBUTION = """
import os
from arcflow.common.lean import skip_optional_imports
skip_optional_imports()
def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0
steps = [
    ("interpreter", ""),
    ("pydantic", "from pydantic import BaseModel"),
    ("pydantic-settings and stdlib", "import pydantic_settings, asyncio, ssl"),
    ("httpx", "import httpx, httpcore"),
    ("nats-py", "import nats.aio.client, nats.js"),
    ("opentelemetry", "import opentelemetry.sdk.metrics, opentelemetry.exporter.prometheus"),
    ("faststream", "import faststream.nats"),
    ("arcflow.{service}", "import arcflow.{service}.service, arcflow.common.health"),
]
previous = 0.0
for name, code in steps:
    exec(code)
    now = rss()
    print(name, round(now - previous, 1))
    previous = now
"""


def _python(code: str, **env: str) -> str:
    """What a fresh ``python -c code`` prints, with a NATS URL (so the block applies) and
    ``env`` added to this environment."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ARCFLOW_NATS_URL": "nats://127.0.0.1:4222", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _attribute(service: str) -> dict[str, float]:
    lines = _python(ATTRIBUTION.format(service=service)).splitlines()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines}


def _source_tree(rev: str, into: Path) -> list[str]:
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "src.tar"
    paths = ["libs/common/src", *(f"services/{s}/src" for s in SERVICES)]
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev, *paths], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return [str(into / p) for p in paths]


def _probe(service: str, pythonpath: list[str], cache: Path) -> dict[str, Any]:
    env = {"PYTHONPYCACHEPREFIX": str(cache)}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    started = time.monotonic()
    rss, cpu, modules, aiohttp = _python(PROBE.format(service=service), **env).split()
    return {
        "rss_mib": round(float(rss), 1),
        "cpu_seconds": round(float(cpu), 3),
        "wall_seconds": round(time.monotonic() - started, 3),
        "modules": int(modules),
        "aiohttp_loaded": aiohttp == "1",
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-rev", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="adr0125")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arcflow-imports-") as tmp:
        root = Path(tmp)
        sides = {"before": _source_tree(args.before_rev, root / "before"), "after": []}
        caches = {side: root / f"pycache-{side}" for side in sides}
        for side, path in sides.items():  # warm-up: compile each side's bytecode
            for service in SERVICES:
                _probe(service, path, caches[side])
        runs: list[dict[str, Any]] = []
        for run in range(1, args.runs + 1):
            for side, path in sides.items():
                load = os.getloadavg()[0]
                for service in SERVICES:
                    row = _probe(service, path, caches[side])
                    runs.append({"run": run, "side": side, "service": service, "load": load, **row})
                    print(json.dumps(runs[-1]), flush=True)
    summary: dict[str, Any] = {}
    for side in sides:
        for service in SERVICES:
            rows = [r for r in runs if r["side"] == side and r["service"] == service]
            summary[f"{side}/{service}"] = {
                key: _spread([r[key] for r in rows]) for key in ("rss_mib", "cpu_seconds")
            } | {"modules": rows[0]["modules"], "aiohttp_loaded": rows[0]["aiohttp_loaded"]}
    result = {
        "benchmark": "import_footprint",
        "before_rev": args.before_rev,
        "after_rev": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip(),
        "python": platform.python_version(),
        "runs": runs,
        "summary": summary,
        "attribution": {service: _attribute(service) for service in SERVICES},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    written = RESULTS / f"import-footprint-{args.label}.json"
    written.write_text(json.dumps(result, indent=2) + "\n")
    for key, row in summary.items():
        print(
            f"{key:22} RSS {row['rss_mib']['median']:6.1f} MiB "
            f"({row['rss_mib']['min']}-{row['rss_mib']['max']}), CPU "
            f"{row['cpu_seconds']['median']:.3f} s, {row['modules']} modules, "
            f"aiohttp {'yes' if row['aiohttp_loaded'] else 'no'}"
        )
    for service, steps in result["attribution"].items():
        print(service, ", ".join(f"{name} +{mib}" for name, mib in steps.items()))
    print(f"result: {written}")


if __name__ == "__main__":
    main()
