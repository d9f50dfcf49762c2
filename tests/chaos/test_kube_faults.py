"""Kubernetes misbehaves in the middle of a burst: writes refused with 409 and 500, every
watch dropped, history compacted so resumed watches get 410, and the API server restarted."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosStack
from tests.chaos.outcome import figures_after, report, run_burst

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


async def test_kubernetes_faults_mid_burst(tmp_path: Path) -> None:
    async with ChaosStack(tmp_path, auth="app") as stack:
        emulator = stack.emulator
        assert emulator is not None
        injected = []
        dropped: list[int] = []

        async def write_errors() -> None:
            for verb, resource, status, reason in (
                ("create", "pods", 500, "InternalError"),
                ("create", "secrets", 500, "InternalError"),
                ("create", "ephemeralrunners", 500, "InternalError"),
                ("patch", "ephemeralrunnersets", 409, "Conflict"),
                ("patch", "ephemeralrunners", 409, "Conflict"),
                ("delete", "ephemeralrunners", 500, "InternalError"),
            ):
                handle = emulator.inject_error(
                    verb=verb,
                    resource=resource,
                    status=status,
                    reason=reason,
                    message=f"chaos: {verb} {resource} refused",
                    times=5,
                )
                injected.append(handle)

        async def dropped_watches() -> None:
            dropped.append(emulator.drop_watches(abrupt=True))

        async def expired_history() -> None:
            emulator.expire_history()
            dropped.append(emulator.drop_watches())

        async def restart() -> None:
            await emulator.restart()

        began = time.monotonic()
        burst, back_after, last_event = await run_burst(
            stack,
            [
                ("409 and 500 on writes", write_errors),
                ("watches dropped", dropped_watches),
                ("410 on resumed watches", expired_history),
                ("API server restarted", restart),
            ],
        )
        figures = await figures_after(burst, last_event=last_event)
        report("Kubernetes faults", began, back_after, figures)
        refused = {f"{i.verb} {i.resource} {i.status}": i.hits for i in injected}
        print(json.dumps({"requests refused": refused, "watches dropped": dropped}))
        assert all(refused.values()), f"a write fault was never hit: {refused}"
        assert all(dropped), f"no watch was open to drop: {dropped}"
        assert figures.restarts == {"watcher": 0, "registrar": 0, "reconciler": 0}
        assert figures.problems() == []
