"""Each service process imports only what it runs (ADR 0125): no aiohttp (nats-py's WebSocket
transport and, before, the health server), no httpx command-line tool (click, rich, pygments),
no kubernetes_asyncio. A guard against them creeping back onto ``python -m arcflow.<service>``'s
path, including the modules the runtime imports when it starts (health, subscribers,
metrics)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = {"aiohttp", "click", "rich", "pygments", "kubernetes_asyncio", "yarl", "multidict"}

PROBE = """
import sys
import arcflow.{service}.__main__
import arcflow.common.health, arcflow.common.service.subscribers
import arcflow.common.telemetry.metrics, faststream.nats, nats.aio.client
loaded = sorted({{m.split('.')[0] for m, mod in sys.modules.items() if mod is not None}})
print(' '.join(loaded))
"""


def _loaded(code: str, nats_url: str = "nats://127.0.0.1:4222") -> set[str]:
    env = {**os.environ, "ARCFLOW_NATS_URL": nats_url}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


@pytest.mark.parametrize("service", ["watcher", "registrar", "reconciler"])
def test_a_service_process_imports_nothing_it_never_runs(service: str) -> None:
    loaded = _loaded(PROBE.format(service=service))
    assert {"nats", "httpx", "faststream", "pydantic", "arcflow"} <= loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_without_the_block_nats_would_load_aiohttp() -> None:
    """The guard above can fail: the same imports without ``skip_optional_imports`` (or with a
    WebSocket NATS URL) load aiohttp through nats-py."""
    plain = "import sys, nats.aio.client; print(' '.join(m for m in sys.modules))"
    assert "aiohttp" in _loaded(plain)
    assert "aiohttp" in _loaded(PROBE.format(service="watcher"), "ws://127.0.0.1:8080")
