"""The dev stack supervises its services as a Deployment would: a SIGKILLed watcher, registrar
and reconciler come back (with back-off) and the demo still completes; restarts are counted."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from arcflow.devstack.stack import EXIT_DONE, SERVICES, DevStack, StackOptions
from tests.polling import eventually

pytestmark = [pytest.mark.scenario, pytest.mark.timeout(300)]


async def test_sigkilled_services_restart_and_the_demo_completes() -> None:
    options = StackOptions(jobs=3, job_duration=0.5, exit_when_done=True, timeout=200)
    async with DevStack(options) as stack:
        killed = {}
        for name in SERVICES:
            process = stack.services[name].process
            assert process is not None, stack.components
            assert process.returncode is None, stack.components
            killed[name] = process.pid
            os.kill(process.pid, signal.SIGKILL)

        async def all_back() -> bool:
            for name, pid in killed.items():
                service = stack.services[name]
                assert service.process is not None, stack.components
                assert service.process.pid != pid, stack.components
                assert stack.components[name].startswith("running ("), stack.components
                assert stack.components[name].endswith("healthy, 1 restart)"), stack.components
            return True

        await eventually(all_back, within=60, interval=0.2, what="every service restarted")
        code, summary = await stack.run(asyncio.Event())
    assert summary["restarts"] == dict.fromkeys(SERVICES, 1)
    assert code == EXIT_DONE, summary
    assert summary["ok"] is True
    assert summary["blocked_by"] == []
    assert summary["jobs"]["completed"] == 3
