"""Importing the service skeleton does not import FastStream, the Kubernetes client or the
metrics exporter, nor pydantic-settings (the runtime imports each only when a spec needs it), so
a light process such as the listener can adopt it."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_skeleton_is_light() -> None:
    code = (
        "import sys, arcflow.common.service, arcflow.common.service.runtime, "
        "arcflow.common.service.entry, arcflow.common.service.flow\n"
        "heavy = ('faststream', 'kubernetes_asyncio', 'opentelemetry.exporter', "
        "'prometheus_client', 'pydantic_settings')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(heavy)}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
