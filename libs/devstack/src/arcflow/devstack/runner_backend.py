"""What plays the runner binary of a runner pod: the protocol, and a runner against the
in-process Actions simulator."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class RunnerOutcome:
    exit_code: int
    job_id: str | None
    message: str = ""


class RunnerBackend(Protocol):
    """What plays the runner binary of a runner pod."""

    async def run(
        self, jit_config: str, on_job: Callable[[str], None] | None = None
    ) -> RunnerOutcome: ...


class SimulatedRunnerBackend:
    """A runner against the in-process Actions simulator: connect with the JIT config, wait
    (as long as it takes, like an idle real runner) for a job, let it run for its duration,
    exit 0. A job without a duration finishes after ``default_job_duration``."""

    def __init__(self, simulator: Any, *, default_job_duration: float = 1.0) -> None:
        self._sim = simulator
        self.default_job_duration = default_job_duration

    async def run(
        self, jit_config: str, on_job: Callable[[str], None] | None = None
    ) -> RunnerOutcome:
        from arcflow.devstack.actions_sim import JitConfigError, JobState

        engine = self._sim.engine
        try:
            connection = self._sim.connect_runner(jit_config)
            job_id = connection.job_id
            while job_id is None:
                job_id = await engine.wait_for_runner_job(connection.runner_id, 30.0)
                if job_id is None and engine.closing:
                    return RunnerOutcome(1, None, "the Actions service went away")
        except JitConfigError as exc:
            return RunnerOutcome(1, None, f"runner registration rejected: {exc}")
        if on_job is not None:
            on_job(job_id)
        job = engine.job(job_id)
        if job.duration is None:
            await asyncio.sleep(self.default_job_duration)
            if job.state is JobState.RUNNING and job.runner_id == connection.runner_id:
                self._sim.complete_job(job_id)
        else:
            finished = await engine.wait_for_job_state(
                job_id, {JobState.COMPLETED}, job.duration + 30.0
            )
            if finished is None:
                return RunnerOutcome(1, job_id, "the job did not finish in time")
        return RunnerOutcome(0, job_id)
