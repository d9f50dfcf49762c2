"""A listener whose Role and RoleBinding go while it stops: a 403 then is taken as done (one
info line, no retry of the batch), while a 403 during normal work stays an error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from arcflow.common.events import JobInfo, JobsBatch, JobStatistics
from arcflow.common.kube.errors import ForbiddenError
from arcflow.listener.config import ScaleSetTarget
from arcflow.listener.decision import ScaleDecider, decider_for

TARGET = ScaleSetTarget(
    scale_set_id=7,
    namespace="ns",
    ars="solo",
    variant="",
    ephemeral_runner_set_name="solo",
    min_runners=0,
    max_runners=10,
    owner="listener-pod-1",
)


class RefusingKube:
    """Every write is refused as the RBAC authorizer refuses it once the RoleBinding is gone."""

    def __init__(self) -> None:
        self.calls = 0

    def _refuse(self, resource: str, name: str) -> None:
        self.calls += 1
        raise ForbiddenError(
            f'{resource}.actions.github.com "{name}" is forbidden: User '
            '"system:serviceaccount:arc-systems:solo-listener" cannot patch resource',
            status=403,
            reason="Forbidden",
        )

    async def patch_merge(
        self, resource: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any:
        self._refuse(resource, name)

    async def patch_status(
        self, resource: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> Any:
        self._refuse(resource, name)


class FakeStream:
    """Stands in for JetStream: stores nothing, acknowledges every publish."""

    def __init__(self) -> None:
        self.published: list[str] = []

    async def publish(self, payload: bytes, subject: str, **_: Any) -> None:
        self.published.append(subject)


def _batch(message_id: int, *jobs: JobInfo) -> JobsBatch:
    return JobsBatch(
        source="listener",
        keys=TARGET.event_keys,
        scale_set_id=TARGET.scale_set_id,
        message_id=message_id,
        statistics=JobStatistics(total_assigned_jobs=message_id),
        jobs=list(jobs),
        session_id="session-1",
    )


def _decider(kube: RefusingKube, stop: asyncio.Event) -> ScaleDecider:
    return decider_for(TARGET, FakeStream(), kube, stopping=stop)  # type: ignore[arg-type]


async def test_a_403_while_running_is_an_error() -> None:
    kube = RefusingKube()
    decider = _decider(kube, asyncio.Event())
    with pytest.raises(ForbiddenError):
        await decider.batch(_batch(1))
    assert decider.ers.refusals.count == 0


async def test_a_403_while_stopping_is_taken_as_done_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = RefusingKube()
    stop = asyncio.Event()
    stop.set()
    decider = _decider(kube, stop)
    started = JobInfo(message_type="JobStarted", job_id="1", runner_name="solo-runner-abcde")
    with caplog.at_level(logging.INFO, logger="arcflow.listener.writes"):
        await decider.batch(_batch(1))
        await decider.batch(_batch(2, started))
        await decider.batch(_batch(3))
    assert kube.calls == 4  # three ERS patches and one runner status: each sent once
    assert decider.ers.refusals.count == 4
    refused = [r for r in caplog.records if "refused (403) while stopping" in r.getMessage()]
    assert len(refused) == 1
    assert refused[0].levelno == logging.INFO
    assert decider.watermark is not None
    assert decider.watermark.message_id == 3  # decided: not retried
