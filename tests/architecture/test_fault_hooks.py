"""Product fault hooks cannot be switched on in an install (issue 32, item 7; ADR 0082).

The listener's crash after a PubAck and the reconciler's lagging cache were switched on by
environment variables, which a chart's ``env``, a listener template's ``env`` or a Deployment
edit can set. Now nothing in a process's environment reaches them: the listener's hook is a
module attribute only a test's own entrypoint sets, the lagging cache is set on the informer
object by the tests that want it, and no product module reads a test switch."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = [
    p
    for root in ("libs/common/src", "services")
    for p in sorted((REPO / root).rglob("*.py"))
    if "/tests/" not in p.as_posix()
]
#: Every name that switched a fault on before, and the test entrypoint's own.
FORMER_SWITCHES = {
    "ARCFLOW_LISTENER_TEST_CRASH_AFTER_PUBLISH": "1",
    "ARCFLOW_LISTENER_TEST_CRASH_BARRIER": "/tmp/barrier",
    "CRASH_AFTER_PUBLISH": "1",
    "CRASH_BARRIER": "/tmp/barrier",
    "ARCFLOW_RECONCILER_CACHE_DELAY_SECONDS": "5",
}


def test_no_product_module_reads_a_test_switch() -> None:
    assert len(PRODUCT) > 100
    pattern = re.compile(r"TEST_CRASH|CRASH_AFTER_PUBLISH|CRASH_BARRIER|cache_delay")
    found = [p.relative_to(REPO).as_posix() for p in PRODUCT if pattern.search(p.read_text())]
    assert found == []


def test_an_environment_with_every_former_switch_leaves_the_listener_hook_off() -> None:
    """The listener process as its image starts it (``arcflow.listener``'s modules), with
    every former switch in its environment, as a rendered pod could carry them."""
    probe = (
        "from arcflow.common.lean import skip_optional_imports; skip_optional_imports(); "
        "import arcflow.listener.service, arcflow.listener.settings; "
        "from arcflow.listener import pump; print(pump.after_publish_hook)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": "/usr/bin:/bin", **FORMER_SWITCHES},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


def test_the_reconciler_has_no_cache_delay_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from arcflow.reconciler import state
    from arcflow.reconciler.settings import ReconcilerSettings

    for name, value in FORMER_SWITCHES.items():
        monkeypatch.setenv(name, value)
    settings = ReconcilerSettings()
    assert not any("delay" in name and "cache" in name for name in type(settings).model_fields)
    # the cache the reconciler builds gets no delay: only a test sets one on an informer
    assert "delay_seconds=" not in inspect.getsource(state.ReconcilerState)
