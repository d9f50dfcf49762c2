"""A runner pod's runner against an Actions simulator over HTTP (another process or container:
``docker compose``), where :class:`arcflow.devstack.runner_backend.SimulatedRunnerBackend` needs the
simulator in the same process. The simulator's control API plays the runner binary:
``POST /_sim/runners/run`` connects with the JIT config, waits for a job, runs it for
``job_duration`` seconds and completes it (docs/actions-simulator.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp

from arcflow.devstack.runner_backend import RunnerOutcome

#: An idle runner waits for a job this long per request; a 408 answer means "ask again".
JOB_WAIT_SECONDS = 600.0
#: Connection attempts while the simulator is not reachable (1 s apart).
CONNECT_ATTEMPTS = 60


class HttpRunnerBackend:
    def __init__(self, base_url: str, *, job_duration: float = 1.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.job_duration = job_duration

    async def run(
        self, jit_config: str, on_job: Callable[[str], None] | None = None
    ) -> RunnerOutcome:
        body = {
            "jit_config": jit_config,
            "job_duration": self.job_duration,
            "job_wait": JOB_WAIT_SECONDS,
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_read=JOB_WAIT_SECONDS + 60)
        failures = 0
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    status, answer = await self._post(session, body)
                except (aiohttp.ClientError, OSError) as exc:
                    failures += 1
                    if failures >= CONNECT_ATTEMPTS:
                        return RunnerOutcome(1, None, f"cannot reach the Actions service: {exc}")
                    await asyncio.sleep(1.0)
                    continue
                if status == 408:  # no job yet: stay idle, as a runner does
                    continue
                if status != 200:
                    reason = str(answer.get("error") or answer)[:200]
                    return RunnerOutcome(
                        1, None, f"the Actions service answered {status}: {reason}"
                    )
                job_id = str(answer["job_id"])
                if on_job is not None:
                    on_job(job_id)
                return RunnerOutcome(0, job_id)

    async def _post(
        self, session: aiohttp.ClientSession, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        async with session.post(f"{self.base_url}/_sim/runners/run", json=body) as response:
            answer = await response.json(content_type=None)
            return response.status, answer if isinstance(answer, dict) else {}


__all__ = ["HttpRunnerBackend"]
