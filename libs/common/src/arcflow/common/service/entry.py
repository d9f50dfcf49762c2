"""``main(spec)``: the process entry point of every service (``sys.exit(main(SERVICE))``).

Exit codes (also in docs/operations.md):

====  ==================================================================================
0     stopped by SIGTERM or SIGINT, cleanly
1     failed while running: an unexpected error, or a loop that must run forever ended
2     invalid settings (the message names the setting; nothing was started); a settings
      loader's :class:`~arcflow.common.service.spec.InvalidSettingsError` is printed as it is
3     a dependency was unreachable at start-up: NATS (within 30 s), or the Kubernetes client
      configuration
====  ==================================================================================
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, Final

from pydantic import ValidationError

from arcflow.common.service.connection import DependencyUnavailableError
from arcflow.common.service.runtime import ServiceFailedError, ServiceRuntime
from arcflow.common.service.signals import run_until_signalled
from arcflow.common.service.spec import InvalidSettingsError, ServiceSpec

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_INVALID_SETTINGS: Final = 2
EXIT_UNAVAILABLE: Final = 3

log = logging.getLogger("arcflow.service")


async def serve(spec: ServiceSpec[Any], settings: Any) -> None:
    """Run ``spec`` until SIGTERM/SIGINT (raises on failure, see :func:`main`)."""
    await run_until_signalled(ServiceRuntime(spec, settings).run)


def main(spec: ServiceSpec[Any]) -> int:
    """Read the settings, set up logging and tracing, run the service; the exit code."""
    try:
        settings = spec.settings()
    except InvalidSettingsError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID_SETTINGS
    except (ValidationError, ValueError) as exc:
        print(f"arcflow-{spec.name}: invalid settings: {exc}", file=sys.stderr)
        return EXIT_INVALID_SETTINGS
    from arcflow.common.telemetry import setup_logging, setup_tracing

    level = str(getattr(settings, "log_level", "INFO")).upper()
    setup_logging(spec.name, json_output=bool(getattr(settings, "log_json", True)), level=level)
    setup_tracing(spec.name)
    try:
        asyncio.run(serve(spec, settings))
    except DependencyUnavailableError as exc:
        log.error("%s could not start: %s", spec.name, exc, extra={"service": spec.name})
        return EXIT_UNAVAILABLE
    except ServiceFailedError:
        return EXIT_FAILED  # already logged by the runtime
    except Exception:
        log.exception("%s failed", spec.name, extra={"service": spec.name})
        return EXIT_FAILED
    return EXIT_OK
