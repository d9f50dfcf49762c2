"""Keep optional imports out of every arcflow process (issue 14 for the listener; ADR 0125
for the services).

Two libraries pull in large optional parts no arcflow process runs:

- nats-py imports aiohttp (~10-13 MiB, ~0.6 CPU s) only for its WebSocket transport; it
  treats aiohttp as optional. It is blocked unless ``ARCFLOW_NATS_URL`` names a ``ws://`` or
  ``wss://`` server. (The services' health endpoint no longer uses aiohttp either.)
- httpx imports its command-line tool (click, rich, pygments) when they are installed; it
  treats that module as optional too. No process runs it.

A ``None`` entry in ``sys.modules`` makes ``import x`` raise ImportError, which both libraries
catch. pydantic's plugin discovery (a scan of every installed package's entry points) is
switched off with ``PYDANTIC_DISABLE_PLUGINS`` unless the environment sets it. Call
:func:`skip_optional_imports` first in a ``__main__``, before anything imports nats, httpx or
pydantic.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

NEVER_USED = ("httpx._main",)
WEBSOCKET_ONLY = ("aiohttp",)


def skip_optional_imports(environ: Mapping[str, str] | None = None) -> list[str]:
    """Block the optional modules the process will not use; returns the blocked names."""
    env = os.environ if environ is None else environ
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    urls = env.get("ARCFLOW_NATS_URL", "").lower()
    blocked = list(NEVER_USED)
    if "ws://" not in urls and "wss://" not in urls:
        blocked.extend(WEBSOCKET_ONLY)
    for name in blocked:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]
    return [name for name in blocked if sys.modules.get(name) is None]
