"""Process entry point: ``python -m arcflow.listener`` (config path in ``LISTENER_CONFIG_PATH``).

Exit codes: 0 after SIGTERM/SIGINT (sessions deleted), 1 when the listener fails (single-set
mode propagates any error, as upstream), 2 for a fatal configuration error.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from arcflow.common.listener_config import ListenerConfig
from arcflow.common.service.signals import run_until_signalled as _run_until_signalled
from arcflow.common.telemetry import setup_logging, setup_tracing
from arcflow.listener.app import Listener
from arcflow.listener.config import ConfigError, load_config
from arcflow.listener.supervisor import FatalError

log = logging.getLogger("arcflow.listener")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR}  # fmt: skip


def configure_logging(config: ListenerConfig) -> None:
    level = _LEVELS.get(config.log_level.lower(), logging.INFO)
    setup_logging("listener", json_output=config.log_format.lower() == "json", level=level)


async def run_until_signalled(listener: Listener) -> None:
    """SIGTERM/SIGINT handling comes from the service skeleton (light: nothing else of it)."""
    await _run_until_signalled(listener.run)


def main() -> int:
    try:
        config, raw = load_config()
    except ConfigError as exc:
        print(f"arcflow listener: fatal configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(config)
    setup_tracing("listener")
    try:
        listener = Listener(config, raw)
        asyncio.run(run_until_signalled(listener))
    except (ConfigError, FatalError) as exc:
        log.error("fatal configuration error: %s", exc)
        print(f"arcflow listener: fatal configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        log.error("listener failed: %s: %s", type(exc).__name__, exc)
        return EXIT_FAILED
    return EXIT_OK
