"""SIGKILL of every service in the middle of one burst, each restarted as its Deployment
would restart it (the chaos stack supervises the processes)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import figures_after, report, run_burst
from tests.polling import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


def sigkill(stack: ChaosStack, name: str) -> Callable[[], Awaitable[None]]:
    service = stack.services[name]

    async def fault() -> None:
        before = service.restarts
        service.kill()

        async def restarted() -> bool:
            return service.restarts > before and service.alive

        await eventually(restarted, within=30, what=f"{name} restarted")
        await service.wait_healthy()

    return fault


async def test_each_service_sigkilled_mid_burst(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path) as stack:
        began = time.monotonic()
        burst, back_after, last_event = await run_burst(
            stack, [(name, sigkill(stack, name)) for name in ("watcher", "registrar", "reconciler")]
        )
        figures = await figures_after(burst, last_event=last_event)
        report("SIGKILL watcher, registrar, reconciler", began, back_after, figures)
        assert figures.restarts == {"watcher": 1, "registrar": 1, "reconciler": 1}
        assert figures.problems() == []
