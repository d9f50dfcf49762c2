"""The listener imports only what it runs (issue 14 item 1): a guard against heavy imports
creeping back into ``python -m arcflow.listener``'s path."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = (
    "kubernetes_asyncio",
    "faststream",
    "aiohttp",
    "jwt",
    "cryptography",
    "yaml",
    "click",
    "pydantic_settings",
    # ADR 0074: installed here (dev tools, other services), never on the listener's path.
    "rich",
    "pygments",
    "urllib3",
    "dateutil",
    "jsonschema",
    "kubernetes_validate",
    "multidict",
    "yarl",
    "prometheus_client",  # imported by the metrics server only when metrics are enabled
)

PROBE = """
import sys
from arcflow.common.lean import skip_optional_imports
skip_optional_imports()
import arcflow.listener.service, arcflow.common.service.entry, nats, httpx
loaded = sorted({m.split('.')[0] for m, mod in sys.modules.items() if mod is not None})
print(' '.join(loaded))
"""


def _loaded(nats_url: str) -> set[str]:
    env = {**os.environ, "ARCFLOW_NATS_URL": nats_url}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def test_the_listener_path_imports_nothing_heavy() -> None:
    loaded = _loaded("nats://127.0.0.1:4222")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert {"nats", "httpx", "pydantic", "arcflow"} <= loaded


def test_a_websocket_nats_url_keeps_aiohttp_available() -> None:
    assert "aiohttp" in _loaded("ws://127.0.0.1:8080")
