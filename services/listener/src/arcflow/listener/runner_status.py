"""The runner-status writer: a ``JobStarted`` message -> its EphemeralRunner's ``status``; a
``JobCompleted`` message -> its ``arcflow.io/job-completed-at`` annotation (ADR 0100: GitHub's
finish time, which the reconciler's slot reclaim reads; the upstream CRD's status has no field
for it and prunes unknown ones)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from arcflow.common.events import JobInfo
from arcflow.common.kube.errors import ForbiddenError, NotFoundError
from arcflow.listener.refusals import StopRefusals
from arcflow.listener.scaler import runner_completed_patch, runner_status_patch

log = logging.getLogger("arcflow.listener.writes")


class KubePatcher(Protocol):
    """The two Kubernetes writes the listener makes."""

    async def patch_merge(
        self, resource: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any: ...

    async def patch_status(
        self, resource: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any: ...


class RunnerStatusWriter:
    """Writes the job a runner started into its status and the time its job completed into its
    annotations (idempotent merge patches: a redelivered batch writes the same values); a
    runner already gone is fine."""

    def __init__(
        self,
        namespace: str,
        kube: KubePatcher,
        refusals: StopRefusals,
        wall_clock: Callable[[], datetime],
    ) -> None:
        self._namespace = namespace
        self._kube = kube
        self._refusals = refusals
        self._wall_clock = wall_clock

    async def write(self, jobs: Sequence[JobInfo]) -> None:
        await asyncio.gather(*(self._write(job) for job in jobs if job.runner_name))

    async def _write(self, job: JobInfo) -> None:
        try:
            if job.message_type == "JobCompleted":
                await self._kube.patch_merge(
                    "EphemeralRunner",
                    job.runner_name,
                    runner_completed_patch(job, self._wall_clock()),
                    namespace=self._namespace,
                )
            else:
                await self._kube.patch_status(
                    "EphemeralRunner",
                    job.runner_name,
                    runner_status_patch(job),
                    namespace=self._namespace,
                )
        except NotFoundError:
            log.debug("EphemeralRunner %s not found; status patch skipped", job.runner_name)
        except ForbiddenError:
            if not self._refusals.excused():
                raise
