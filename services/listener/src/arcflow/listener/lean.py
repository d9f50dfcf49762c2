"""Keep optional imports out of the listener process (issue 14: a light process).

Two libraries pull in large optional parts the listener never runs:

- nats-py imports aiohttp (~13 MB, ~0.6 CPU s) only for its WebSocket transport; it treats
  aiohttp as optional. The listener blocks it unless ``ARCFLOW_NATS_URL`` names a ``ws://`` or
  ``wss://`` server.
- httpx imports its command-line tool (click, rich, pygments) when they are installed; it
  treats that module as optional too. The listener never runs it.

A ``None`` entry in ``sys.modules`` makes ``import x`` raise ImportError, which both libraries
catch. pydantic's plugin discovery (a scan of every installed package's entry points) is
switched off with ``PYDANTIC_DISABLE_PLUGINS`` unless the environment sets it. Call
:func:`skip_optional_imports` before anything imports nats, httpx or pydantic.

``importlib.metadata`` (with ``email``, ``zipfile``, ``csv``: ~3.5 MiB, ADR 0041) is not
imported either. Two libraries import it at module level for something the listener does
not need from it:

- nats-py reads its own version for the CONNECT message; it is imported here with
  ``importlib.metadata`` blocked (nats-py then says ``0.0.0``) and given its real version
  from :func:`~arcflow.common.dist_version.distribution_version` right after.
- pydantic's plugin loader imports it to scan entry points, which it never does while
  plugins are disabled; with ``PYDANTIC_DISABLE_PLUGINS=__all__`` (the default set here) the
  loader is replaced by a module whose ``get_plugins`` returns no plugin, exactly what the
  real one returns under that setting. An environment that enables plugins keeps the real
  loader.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable, Mapping

NEVER_USED = ("httpx._main",)
WEBSOCKET_ONLY = ("aiohttp",)
METADATA = "importlib.metadata"
PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


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
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") == "__all__":
        sys.modules.setdefault(PYDANTIC_PLUGIN_LOADER, _no_plugins_loader())
    _import_nats_without_metadata()
    return [name for name in blocked if sys.modules.get(name) is None]


def _no_plugins(*_args: object) -> Iterable[object]:
    return ()


def _no_plugins_loader() -> types.ModuleType:
    """What pydantic's loader is with every plugin disabled: ``get_plugins() == ()``."""
    module = types.ModuleType(PYDANTIC_PLUGIN_LOADER, "pydantic plugins disabled (arcflow)")
    module.get_plugins = _no_plugins  # type: ignore[attr-defined]
    return module


def _import_nats_without_metadata() -> None:
    if "nats.aio.client" in sys.modules or METADATA in sys.modules:
        return
    sys.modules[METADATA] = None  # type: ignore[assignment]
    try:
        import nats.aio.client
    finally:
        del sys.modules[METADATA]
    from arcflow.common.dist_version import distribution_version

    nats.aio.client.__version__ = distribution_version("nats-py") or "0.0.0"
