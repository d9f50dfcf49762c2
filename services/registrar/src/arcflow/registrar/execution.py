"""Carrying out a plan (:mod:`arcflow.registrar.planning`) against the Actions service, the
``scalesets`` KV bucket and ``arc.scalesets``: registrations of one pass concurrently, then
deletions one after another; each failure reported as ``registration.failed``.

Running a plan twice changes nothing the second time: a create is a get-or-create by name
(safe across replicas because every pass holds the ARS's lease lock), an announcement and a
deletion are idempotent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TypedDict

from arcflow.common import subjects
from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.errors import ActionsClientError, ScaleSetNotFoundError
from arcflow.common.actions.models import DEFAULT_LABEL_TYPE, Label, RunnerScaleSet, RunnerSetting
from arcflow.common.actions.retry import retry_deadline
from arcflow.common.constants import DEFAULT_RUNNER_GROUP_ID
from arcflow.common.errors import is_retryable
from arcflow.common.events import EventKeys, ScaleSetAssigned, ScaleSetDeleted
from arcflow.common.models import AutoscalingRunnerSet, AutoscalingRunnerSetSpec
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.registrar.ars_clients import ArsClients
from arcflow.registrar.connection import ServerConnectionError
from arcflow.registrar.credentials import CredentialsUnavailableError
from arcflow.registrar.gone import GoneScaleSets
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.planning import (
    ActionKind,
    Change,
    DesiredScaleSet,
    Plan,
    PlannedAction,
)
from arcflow.registrar.records import ScaleSetRecords
from arcflow.registrar.reporting import Reporter, failure_kind, reason_of

log = logging.getLogger(__name__)

#: Variants of one ARS registered at once (each is its own scale set name: no two requests
#: of one pass are about the same scale set; the per-ARS lock still serialises passes).
REGISTRATION_CONCURRENCY: Final = 10
#: A registration of one pass stops retrying a failing Actions call after this many seconds
#: and reports ``registration.failed`` (the work queue retries the pass with backoff): the
#: ARS condition says "unreachable" within seconds, not after the client's 15 s of retries
#: (ADR 0064).
REGISTRATION_REPORT_SECONDS: Final = 5.0


class Outcome(StrEnum):
    CONVERGED = "converged"
    PENDING_DELETIONS = "pending_deletions"
    CREDENTIALS = "credentials_unavailable"
    FAILED = "failed"
    """Some variant failed with a non-retryable error (reported; looked at again later)."""


class RetryableRegistrationError(Exception):
    """The Actions service is unavailable (5xx, 429, network): the work queue retries the
    pass with backoff."""


@dataclass
class ConvergeResult:
    namespace: str
    ars: str
    outcome: Outcome
    plan: Plan | None = None
    failures: list[str] = field(default_factory=list)


@dataclass
class _GroupCache:
    """The runner group of one pass, resolved at most once
    (docs/upstream-behaviour.md#runner-variants)."""

    name: str
    resolved: tuple[int, str] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _labels_of(scale_set: RunnerScaleSet) -> list[str]:
    return [label.name for label in scale_set.labels]


def _wire_labels(labels: Iterable[str]) -> list[Label]:
    return [Label(type=DEFAULT_LABEL_TYPE, name=name) for name in labels]


class _ScaleSetEventFields(TypedDict):
    keys: EventKeys
    variant: str
    scale_set_id: int
    scale_set_name: str


def _scale_set_event_fields(record: ScaleSetRecord) -> _ScaleSetEventFields:
    """What ``scaleset.assigned`` and ``scaleset.deleted`` both say about the record's set."""
    return _ScaleSetEventFields(
        keys=EventKeys(
            namespace=record.namespace,
            ars=record.ars,
            variant=record.variant,
            scale_set_id=record.scale_set_id,
        ),
        variant=record.variant,
        scale_set_id=record.scale_set_id,
        scale_set_name=record.scale_set_name,
    )


class PlanExecutor:
    """Executes one ARS's plan."""

    def __init__(
        self,
        *,
        clients: ArsClients,
        records: ScaleSetRecords,
        reporter: Reporter,
        gone: GoneScaleSets,
        metrics: RegistrarMetrics,
    ) -> None:
        self.clients = clients
        self.records = records
        self.reporter = reporter
        self.gone = gone
        self.metrics = metrics

    async def execute(
        self, namespace: str, name: str, ars: AutoscalingRunnerSet | None, plan: Plan
    ) -> ConvergeResult:
        result = ConvergeResult(namespace, name, Outcome.CONVERGED, plan)
        client: ActionsClient | None = None
        if plan.needs_actions_service:
            spec: AutoscalingRunnerSetSpec | None = None
            if ars is not None:
                spec = ars.spec
                url, secret = spec.github_config_url, spec.github_config_secret
            else:
                first = next(a.record for a in plan.actions if a.record is not None)
                url, secret = first.github_config_url, first.github_config_secret
            try:
                client = await self.clients.client_for(namespace, url, secret, spec)
            except CredentialsUnavailableError as exc:
                kind = "connection" if isinstance(exc, ServerConnectionError) else "credentials"
                await self.reporter.failure(
                    namespace, name, "", str(exc), retryable=True, kind=kind
                )
                result.outcome = Outcome.CREDENTIALS
                result.failures.append(str(exc))
                return result
        group = _GroupCache(plan.runner_group)
        retry_reasons: list[str] = []
        gate = asyncio.Semaphore(REGISTRATION_CONCURRENCY)

        async def attempt(action: PlannedAction) -> None:
            try:
                async with gate:
                    with retry_deadline(
                        asyncio.get_running_loop().time() + REGISTRATION_REPORT_SECONDS
                    ):
                        await self._apply(namespace, name, ars, action, client, group)
            except ActionsClientError as exc:
                reason = reason_of(exc)
                retryable = is_retryable(exc)  # the one decision: arcflow.common.errors
                scale_set = (
                    action.desired.name
                    if action.desired
                    else (action.record.scale_set_name if action.record else "")
                )
                await self.reporter.failure(
                    namespace,
                    name,
                    action.variant,
                    reason,
                    retryable=retryable,
                    scale_set_name=scale_set,
                    kind="upstream" if retryable else "rejected",
                    event_kind=failure_kind(exc),
                )
                result.failures.append(reason)
                if retryable:
                    retry_reasons.append(reason)

        # Registrations first and concurrently (new variants become usable soonest; 100 ARSs
        # of 10 variants applied at once wait on this), deletions last, one after another.
        registrations = plan.of_kind(ActionKind.CREATE, ActionKind.UPDATE, ActionKind.KEEP)
        outcomes = await asyncio.gather(
            *(attempt(action) for action in registrations), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # the pass fails as before; every other variant has finished
        for action in plan.of_kind(ActionKind.DELETE, ActionKind.WAIT):
            await attempt(action)
        if retry_reasons:
            raise RetryableRegistrationError(
                f"Actions service unavailable for {namespace}/{name}: {retry_reasons[0]}"
            )
        if result.failures:
            result.outcome = Outcome.FAILED
        elif plan.pending_deletions:
            result.outcome = Outcome.PENDING_DELETIONS
        else:
            self.reporter.clear(namespace, name)
        return result

    async def _apply(
        self,
        namespace: str,
        name: str,
        ars: AutoscalingRunnerSet | None,
        action: PlannedAction,
        client: ActionsClient | None,
        group: _GroupCache,
    ) -> None:
        if action.kind is ActionKind.WAIT:
            log.info(
                "scale set deletion waits for runners",
                extra={"namespace": namespace, "ars": name, "variant": action.variant},
            )
            return
        if action.kind is ActionKind.KEEP:
            if action.announce and action.record is not None:
                await self.announce(action.record, ars)
            return
        assert client is not None, "plan needs the Actions service"
        if action.kind is ActionKind.DELETE:
            assert action.record is not None
            await self._delete(client, action.record, action.reason)
            return
        assert ars is not None
        assert action.desired is not None
        if action.kind is ActionKind.UPDATE and action.record is not None:
            scale_set = await self._update(
                client, action.record, action.desired, action.changes, group
            )
            op = "updated"
        else:
            scale_set, op = await self._get_or_create(client, action.desired, group)
        self.metrics.registrations.add(1, {"op": op})
        record = ScaleSetRecord(
            namespace=namespace,
            ars=name,
            variant=action.variant,
            scale_set_id=scale_set.id,
            scale_set_name=scale_set.name or action.desired.name,
            runner_group_id=scale_set.runner_group_id or DEFAULT_RUNNER_GROUP_ID,
            runner_group_name=scale_set.runner_group_name,
            labels=_labels_of(scale_set) or list(action.desired.labels),
            github_config_url=ars.spec.github_config_url,
            github_config_secret=ars.spec.github_config_secret,
            ars_uid=ars.metadata.uid or "",
            announced=False,
        )
        log.info(
            "scale set registered",
            extra={
                "namespace": namespace,
                "ars": name,
                "variant": action.variant,
                "op": op,
                "scale_set_id": record.scale_set_id,
                "scale_set": record.scale_set_name,
            },
        )
        await self.records.put(record)
        self.gone.registered(namespace, name, action.variant)
        await self.announce(record, ars)

    async def _runner_group(self, client: ActionsClient, group: _GroupCache) -> tuple[int, str]:
        async with group.lock:  # variants register concurrently: one lookup per pass
            if group.resolved is None:
                if not group.name:
                    group.resolved = (DEFAULT_RUNNER_GROUP_ID, "")
                else:
                    found = await client.get_runner_group_by_name(group.name)
                    group.resolved = (found.id, found.name)
            return group.resolved

    async def _get_or_create(
        self, client: ActionsClient, desired: DesiredScaleSet, group: _GroupCache
    ) -> tuple[RunnerScaleSet, str]:
        group_id, _ = await self._runner_group(client, group)
        existing = await client.get_runner_scale_set(group_id, desired.name)
        if existing is None:
            created = await client.create_runner_scale_set(
                RunnerScaleSet(
                    name=desired.name,
                    runner_group_id=group_id,
                    labels=_wire_labels(desired.labels),
                    runner_setting=RunnerSetting(disable_update=True),
                )
            )
            return created, "created"
        if set(_labels_of(existing)) != set(desired.labels):
            updated = await client.update_runner_scale_set(
                existing.id,
                RunnerScaleSet(
                    labels=_wire_labels(desired.labels),
                    runner_setting=RunnerSetting(disable_update=True),
                ),
            )
            return updated, "adopted"
        return existing, "adopted"

    async def _update(
        self,
        client: ActionsClient,
        record: ScaleSetRecord,
        desired: DesiredScaleSet,
        changes: tuple[Change, ...],
        group: _GroupCache,
    ) -> RunnerScaleSet:
        patch = RunnerScaleSet(runner_setting=RunnerSetting(disable_update=True))
        if Change.NAME in changes:
            patch.name = desired.name
        if Change.LABELS in changes or Change.NAME in changes:
            patch.labels = _wire_labels(desired.labels)
        if Change.RUNNER_GROUP in changes:
            patch.runner_group_id = (await self._runner_group(client, group))[0]
        try:
            return await client.update_runner_scale_set(record.scale_set_id, patch)
        except ScaleSetNotFoundError:
            # Deleted behind our back: register it again.
            scale_set, _ = await self._get_or_create(client, desired, group)
            return scale_set

    async def announce(self, record: ScaleSetRecord, ars: AutoscalingRunnerSet | None) -> None:
        await self.reporter.publish(
            subjects.scalesets_subject(record.namespace, record.ars, record.variant),
            ScaleSetAssigned(
                source=self.reporter.source,
                **_scale_set_event_fields(record),
                runner_group_id=record.runner_group_id,
                runner_group_name=record.runner_group_name,
                labels=list(record.labels),
                ars_generation=ars.metadata.generation if ars is not None else None,
            ),
        )
        await self.records.put(record.model_copy(update={"announced": True}))

    async def _delete(self, client: ActionsClient, record: ScaleSetRecord, reason: str) -> None:
        try:
            await client.delete_runner_scale_set(record.scale_set_id)
        except ScaleSetNotFoundError:
            log.info("scale set already gone", extra={"scale_set_id": record.scale_set_id})
        self.metrics.deletions.add(1)
        log.info(
            "scale set deleted",
            extra={
                "namespace": record.namespace,
                "ars": record.ars,
                "variant": record.variant,
                "scale_set_id": record.scale_set_id,
                "reason": reason,
            },
        )
        # Publish before forgetting: a crash in between repeats the (idempotent) delete and
        # the event, rather than losing the fact.
        await self.reporter.publish(
            subjects.scalesets_subject(record.namespace, record.ars, record.variant),
            ScaleSetDeleted(
                source=self.reporter.source,
                **_scale_set_event_fields(record),
                reason=reason,
            ),
        )
        await self.records.delete(record)
        self.gone.forget(record.namespace, record.ars, record.variant)
