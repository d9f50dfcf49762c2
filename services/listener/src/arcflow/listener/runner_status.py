"""The runner-status writer: a ``JobStarted`` message -> its EphemeralRunner's ``status``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from arcflow.common.events import JobInfo
from arcflow.common.kube.errors import ForbiddenError, NotFoundError
from arcflow.listener.refusals import StopRefusals
from arcflow.listener.scaler import runner_status_patch

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
    """Writes the job a runner started into its status; a runner already gone is fine."""

    def __init__(self, namespace: str, kube: KubePatcher, refusals: StopRefusals) -> None:
        self._namespace = namespace
        self._kube = kube
        self._refusals = refusals

    async def write(self, jobs: Sequence[JobInfo]) -> None:
        await asyncio.gather(*(self._write(job) for job in jobs if job.runner_name))

    async def _write(self, job: JobInfo) -> None:
        try:
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
