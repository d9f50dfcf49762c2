"""The registrar's convergence loop body: read an ARS, plan, execute against GitHub, publish.

Level-based: whatever event arrives for an ARS, :meth:`Registrar.converge` reads the current
object from Kubernetes and the known registrations from the KV bucket, plans with
:func:`~arcflow.registrar.planning.plan_scale_sets` and executes the plan. Running it twice
changes nothing the second time. Every pass for one ARS runs under the per-ARS lease lock
(:mod:`arcflow.registrar.locks`), which makes get-or-create by name safe across replicas.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypedDict

from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError
from nats.js.kv import KeyValue

from arcflow.common import subjects
from arcflow.common.actions.client import ActionsClient
from arcflow.common.actions.errors import (
    ActionsClientError,
    ActionsError,
    CredentialsError,
    ScaleSetNotFoundError,
)
from arcflow.common.actions.models import DEFAULT_LABEL_TYPE, Label, RunnerScaleSet, RunnerSetting
from arcflow.common.actions.retry import retry_deadline
from arcflow.common.cache import ObjectCache
from arcflow.common.cache.store import resource_version_of
from arcflow.common.constants import (
    DEFAULT_RUNNER_GROUP_ID,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from arcflow.common.errors import is_retryable
from arcflow.common.events import (
    EventBase,
    EventKeys,
    RegistrationFailed,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SpecInvalid,
    SpecIssue,
)
from arcflow.common.kube import (
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
    KubeClient,
    NotFoundError,
    Resource,
)
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.nats import KV_SCALESETS, publish_event
from arcflow.common.scaleset_records import (
    ScaleSetRecord,
    ars_key_filter,
    parse_record_key,
    record_key,
)
from arcflow.common.telemetry import redact_text
from arcflow.common.validation import FieldError, summarize, validate_manifest
from arcflow.registrar.connection import (
    Manifest,
    ServerConnectionError,
    read_server_connection,
)
from arcflow.registrar.credentials import (
    ActionsClientCache,
    CredentialsUnavailableError,
    read_secret_data,
)
from arcflow.registrar.locks import LeaseLocks
from arcflow.registrar.metrics import RegistrarMetrics
from arcflow.registrar.planning import (
    ActionKind,
    Change,
    DesiredScaleSet,
    Plan,
    PlannedAction,
    desired_scale_sets,
    is_deleting,
    live_variants,
    plan_scale_sets,
)

log = logging.getLogger(__name__)

SOURCE: Final = "registrar"
#: A failure already reported with the same reason is not re-published before this many seconds.
REPORT_REPEAT_SECONDS: Final = 300.0
#: Deadline of one KV snapshot read (a stuck read must not hold a converge forever).
_KV_SNAPSHOT_DEADLINE: Final = 15.0
#: Variants of one ARS registered at once (each is its own scale set name: no two requests
#: of one pass are about the same scale set; the per-ARS lock still serialises passes).
REGISTRATION_CONCURRENCY: Final = 10
#: A registration of one pass stops retrying a failing Actions call after this many seconds
#: and reports ``registration.failed`` (the pass is retried by redelivery and the sweep): the
#: ARS condition says "unreachable" within seconds, not after the client's 15 s of retries
#: (ADR 0064).
REGISTRATION_REPORT_SECONDS: Final = 5.0
#: How often the sweep asks GitHub whether each registered scale set still exists (one GET
#: per scale set; GitHub deletes scale sets behind our back,
#: docs/upstream-behaviour.md#scale-sets-deleted-on-github). 0 turns it off.
VERIFY_INTERVAL_SECONDS: Final = 300.0


class Outcome(StrEnum):
    CONVERGED = "converged"
    PENDING_DELETIONS = "pending_deletions"
    INVALID = "spec_invalid"
    CREDENTIALS = "credentials_unavailable"
    FAILED = "failed"
    """Some variant failed with a non-retryable error (reported; retried by the sweep)."""
    COALESCED = "coalesced"
    """A pass for this ARS was already waiting for its lock here; that pass covers this one."""


class RetryableRegistrationError(Exception):
    """The Actions service is unavailable (5xx, 429, network): retry the event later."""


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


def newest_version(first: str, second: str) -> str:
    """The newer of two seen resourceVersions; "" (read the ARS over HTTP) unless both are
    integers, as the API server's are."""
    if first.isdigit() and second.isdigit():
        return first if int(first) >= int(second) else second
    return ""


def lock_key(namespace: str, ars: str) -> str:
    return ars_key_filter(namespace, ars).removesuffix(".*")


def _reason(exc: BaseException) -> str:
    return redact_text(f"{type(exc).__name__}: {exc}")[:1000]


def failure_kind(exc: BaseException) -> str:
    """The ``kind`` of a ``registration.failed`` event for an Actions error (ADR 0064)."""
    if isinstance(exc, ScaleSetNotFoundError):
        return "scale_set_gone"
    if isinstance(exc, CredentialsError):
        return "credentials"
    if isinstance(exc, ActionsError) and exc.status in (401, 403):
        return "refused"
    if is_retryable(exc):
        return "unreachable"
    return "rejected"


def _labels_of(scale_set: RunnerScaleSet) -> list[str]:
    return [label.name for label in scale_set.labels]


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


def _wire_labels(labels: Iterable[str]) -> list[Label]:
    return [Label(type=DEFAULT_LABEL_TYPE, name=name) for name in labels]


class Registrar:
    """Converges the GitHub runner scale sets of AutoscalingRunnerSets."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        js: JetStreamContext,
        records: KeyValue,
        locks: LeaseLocks,
        clients: ActionsClientCache,
        metrics: RegistrarMetrics | None = None,
        source: str = SOURCE,
        ars_cache: ObjectCache | None = None,
        namespaces: Sequence[str] = (),
    ) -> None:
        self.kube = kube
        #: The namespaces whose sets it registers (empty: all): the sweep lists each of them,
        #: never the whole cluster, and leaves the records of other namespaces alone.
        self.namespaces = tuple(sorted(set(namespaces)))
        #: The watch-fed ARS cache (the JIT lookup's): a converge reads from it when it holds
        #: at least the version the triggering event saw (ADR 0031).
        self.ars_cache = ars_cache
        #: Converges that read the ARS over HTTP (tests and benchmarks read it).
        self.ars_reads = 0
        self.js = js
        self.records = records
        self.locks = locks
        self.clients = clients
        self.metrics = metrics or RegistrarMetrics()
        self.source = source
        self._reported: dict[tuple[str, str, str, str], tuple[str, float]] = {}
        # ARSs with a pass waiting for the lock in this process (not yet reading anything), and
        # the newest ARS version the events it answers for saw ("" = read over HTTP).
        self._waiting: dict[tuple[str, str], str] = {}
        # The version a pass that failed while waiting answered for: its redelivered event's
        # pass must read at least that (the coalesced events were acknowledged).
        self._carried: dict[tuple[str, str], str] = {}
        #: Passes not run because one was already waiting (ADR 0042).
        self.coalesced = 0
        #: (namespace, ars, variant) -> the id of its scale set that GitHub no longer has
        #: (a JIT request or the sweep's check got 404): the next pass registers it again.
        self.gone: dict[tuple[str, str, str], int] = {}
        #: (namespace, ars) -> monotonic time its scale sets were last checked on GitHub.
        self._verified: dict[tuple[str, str], float] = {}
        self.verify_interval = VERIFY_INTERVAL_SECONDS
        #: Scale sets registered again after GitHub deleted them (tests read it).
        self.reregistered = 0

    # --- reads ----------------------------------------------------------------------------

    async def get_ars_manifest(
        self, namespace: str, name: str, seen_version: str = ""
    ) -> dict[str, Any] | None:
        """The ARS: from the cache when it holds ``seen_version`` or newer, else one GET."""
        cached = self._cached_ars(namespace, name, seen_version)
        if cached is not None:
            return cached
        self.ars_reads += 1
        try:
            return await self.kube.get(AUTOSCALING_RUNNER_SET, name, namespace)
        except NotFoundError:
            return None

    def _cached_ars(self, namespace: str, name: str, seen_version: str) -> dict[str, Any] | None:
        """The cached ARS if it is at least as new as the version an event or list saw.

        The cache and the event come over different watches, so the cache may lag the event:
        then (and for an object the cache does not hold, a deletion included) the caller reads
        over HTTP. Versions compare as integers only (the API server's are)."""
        cache = self.ars_cache
        if cache is None or not seen_version.isdigit() or not cache.is_synced:
            return None
        doc = cache.get(AUTOSCALING_RUNNER_SET, name, namespace)
        if doc is None:
            return None
        held = resource_version_of(doc)
        if not held.isdigit() or int(held) < int(seen_version):
            return None
        return doc

    async def load_records(
        self, namespace: str | None = None, ars: str | None = None
    ) -> list[ScaleSetRecord]:
        """Registrations of one ARS (or all of them).

        The keys come from the bucket stream's subject list (one ``STREAM.INFO`` request with a
        subject filter) and each value from a direct get: no consumer is created, so nothing
        can be left behind, and every request has the client's timeout. A KV watch would
        create an ephemeral consumer per read, which the server keeps for 5 minutes when the
        read is interrupted (issue 12 item 6).
        """
        key_filter = ">" if namespace is None or ars is None else ars_key_filter(namespace, ars)
        stream = f"KV_{KV_SCALESETS.bucket}"
        prefix = f"$KV.{KV_SCALESETS.bucket}."
        async with asyncio.timeout(_KV_SNAPSHOT_DEADLINE):
            info = await self.js.stream_info(stream, subjects_filter=prefix + key_filter)
            keys = sorted(s.removeprefix(prefix) for s in (info.state.subjects or {}))
            found: list[ScaleSetRecord] = []
            for key in keys:
                try:
                    entry = await self.records.get(key)
                except (KeyNotFoundError, KeyDeletedError):
                    continue  # deleted (a delete marker is the subject's last message)
                if not entry.value:
                    continue
                try:
                    found.append(ScaleSetRecord.decode(entry.value))
                except ValueError:
                    log.error("ignoring a malformed scale set record", extra={"key": key})
        return found

    async def records_by_variant(self, namespace: str, ars: str) -> dict[str, ScaleSetRecord]:
        return {r.variant: r for r in await self.load_records(namespace, ars)}

    async def _live_variants(self, namespace: str, ars: str, known: Iterable[str]) -> set[str]:
        selector = {LABEL_SCALE_SET_NAME: ars, LABEL_SCALE_SET_NAMESPACE: namespace}
        runner_sets, runners = await asyncio.gather(
            self.kube.list(EPHEMERAL_RUNNER_SET, namespace=namespace, label_selector=selector),
            self.kube.list(EPHEMERAL_RUNNER, namespace=namespace, label_selector=selector),
        )
        return live_variants(ars, runner_sets.items, runners.items, known)

    # --- clients --------------------------------------------------------------------------

    async def client_for(
        self,
        namespace: str,
        config_url: str,
        secret_name: str,
        spec: Mapping[str, Any] | None = None,
    ) -> ActionsClient:
        """The cached Actions client for these credentials and the CA and proxy the ARS
        ``spec`` names; raises :class:`CredentialsUnavailableError` when the Secret is missing
        or malformed (:class:`ServerConnectionError` for the CA ConfigMap or a proxy
        Secret)."""
        data = await read_secret_data(self.kube, namespace, secret_name)
        connection = await read_server_connection(self._get_or_none, namespace, spec or {})
        return await self.clients.client_for(
            config_url, data, f"{namespace}/{secret_name}", connection
        )

    async def _get_or_none(self, resource: Resource, namespace: str, name: str) -> Manifest | None:
        try:
            return await self.kube.get(resource, name, namespace)
        except NotFoundError:
            return None

    async def client_for_ars(self, namespace: str, name: str) -> tuple[ActionsClient, int]:
        """Client of an ARS (from its spec, or from a registration when the ARS is gone) and
        its registration count; raises ``LookupError`` when neither exists."""
        doc = await self.get_ars_manifest(namespace, name)
        records = await self.load_records(namespace, name)
        spec: Mapping[str, Any] = {}
        if doc is not None:
            spec = doc.get("spec") or {}
            url, secret = (
                str(spec.get("githubConfigUrl") or ""),
                str(spec.get("githubConfigSecret") or ""),
            )
        elif records:
            url, secret = records[0].github_config_url, records[0].github_config_secret
        else:
            raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} not found")
        if not url:
            raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} has no githubConfigUrl")
        return await self.client_for(namespace, url, secret, spec), len(records)

    # --- publishing -----------------------------------------------------------------------

    async def _publish(self, subject: str, event: EventBase) -> None:
        await publish_event(self.js, subject, event)

    def _should_report(self, key: tuple[str, str, str, str], reason: str) -> bool:
        now = time.monotonic()
        previous = self._reported.get(key)
        if (
            previous is not None
            and previous[0] == reason
            and now - previous[1] < REPORT_REPEAT_SECONDS
        ):
            return False
        self._reported[key] = (reason, now)
        return True

    def _clear_reports(self, namespace: str, ars: str) -> None:
        for key in [k for k in self._reported if k[0] == namespace and k[1] == ars]:
            del self._reported[key]

    async def _report_failure(
        self,
        namespace: str,
        ars: str,
        variant: str,
        reason: str,
        *,
        retryable: bool,
        scale_set_name: str = "",
        kind: str,
        event_kind: str = "",
    ) -> None:
        self.metrics.errors.add(1, {"kind": kind})
        log.warning(
            "registration failed",
            extra={
                "namespace": namespace,
                "ars": ars,
                "variant": variant,
                "reason": reason,
                "retryable": retryable,
            },
        )
        if not self._should_report((namespace, ars, variant, "registration.failed"), reason):
            return
        await self._publish(
            subjects.errors_subject(namespace, ars),
            RegistrationFailed(
                source=self.source,
                keys=EventKeys(namespace=namespace, ars=ars, variant=variant),
                variant=variant,
                scale_set_name=scale_set_name,
                reason=reason,
                retryable=retryable,
                kind=event_kind or kind,
            ),
        )

    # --- scale sets deleted on the GitHub side --------------------------------------------

    def scale_set_gone(self, namespace: str, ars: str, variant: str, scale_set_id: int) -> bool:
        """GitHub answered 404 for a registered scale set: the next pass registers the variant
        again under the same name. True when this is news (the caller then converges)."""
        key = (namespace, ars, variant)
        if self.gone.get(key) == scale_set_id:
            return False
        self.gone[key] = scale_set_id
        log.warning(
            "scale set deleted on the GitHub side; registering it again",
            extra={"namespace": namespace, "ars": ars, "variant": variant, "id": scale_set_id},
        )
        return True

    def _verify_due(self, namespace: str, name: str) -> bool:
        if self.verify_interval <= 0:
            return False
        last = self._verified.get((namespace, name))
        return last is None or time.monotonic() - last >= self.verify_interval

    async def _verify(
        self,
        namespace: str,
        name: str,
        ars: AutoscalingRunnerSet,
        records: Mapping[str, ScaleSetRecord],
    ) -> None:
        """Ask GitHub for each registered scale set by id; a missing one is marked gone."""
        self._verified[(namespace, name)] = time.monotonic()
        spec = ars.spec.model_dump(by_alias=True, exclude_none=True)
        try:
            client = await self.client_for(
                namespace, ars.spec.github_config_url, ars.spec.github_config_secret, spec
            )
            for variant, record in records.items():
                if record.github_config_url != ars.spec.github_config_url:
                    continue  # the plan registers it at the new URL anyway
                with retry_deadline(asyncio.get_running_loop().time() + 10.0):
                    found = await client.get_runner_scale_set_by_id(record.scale_set_id)
                if found is None:
                    self.scale_set_gone(namespace, name, variant, record.scale_set_id)
        except (CredentialsUnavailableError, ActionsClientError) as exc:
            # Not a verdict on the scale sets; the next pass that needs GitHub reports it.
            log.info(
                "could not check the scale sets on GitHub",
                extra={"namespace": namespace, "ars": name, "error": _reason(exc)},
            )

    def _drop_gone(
        self, namespace: str, name: str, records: dict[str, ScaleSetRecord], wanted: set[str]
    ) -> list[ScaleSetRecord]:
        """Records of wanted variants whose scale set GitHub no longer has, taken out of
        ``records`` so the plan registers them again (the KV record is overwritten)."""
        dropped = []
        for variant, record in list(records.items()):
            if variant in wanted and self.gone.get((namespace, name, variant)) == (
                record.scale_set_id
            ):
                dropped.append(records.pop(variant))
        return dropped

    # --- convergence ----------------------------------------------------------------------

    async def converge(
        self, namespace: str, name: str, *, trigger: str = "event", seen_version: str = ""
    ) -> ConvergeResult:
        """Bring the scale sets of one ARS to its current spec (idempotent).

        ``seen_version``: the ARS resourceVersion the trigger saw; a cached copy at least that
        new is read instead of the API server."""
        key = (namespace, name)
        if key in self._waiting:
            # Level-based: the waiting pass reads the ARS and the records only once it holds
            # the lock, so it sees this change too (it reads at least this event's version).
            # 100 ARSs applied at once make four or five events each while the first pass
            # registers; without this, those passes wait for the lock in the consumer's slots
            # and registration stalls (ADR 0042).
            self._waiting[key] = newest_version(self._waiting[key], seen_version)
            self.coalesced += 1
            return ConvergeResult(namespace, name, Outcome.COALESCED)
        started = time.perf_counter()
        self.metrics.converges.add(1, {"trigger": trigger})
        if key in self._carried:
            seen_version = newest_version(self._carried.pop(key), seen_version)
        self._waiting[key] = seen_version
        holding = False
        try:
            async with self.locks.hold(lock_key(namespace, name)):
                holding = True
                seen_version = self._waiting.pop(key, seen_version)
                return await self._converge_locked(
                    namespace, name, seen_version, verify=trigger == "sweep"
                )
        finally:
            if not holding:  # failed while waiting; once held, the entry is the next pass's
                self._carried[key] = self._waiting.pop(key, seen_version)
            self.metrics.converge_duration.record(time.perf_counter() - started)

    async def _converge_locked(
        self, namespace: str, name: str, seen_version: str = "", *, verify: bool = False
    ) -> ConvergeResult:
        doc = await self.get_ars_manifest(namespace, name, seen_version)
        ars: AutoscalingRunnerSet | None = None
        if doc is not None:
            deleting = bool((doc.get("metadata") or {}).get("deletionTimestamp"))
            problems = validate_manifest(doc)
            if problems and not deleting:
                await self._report_invalid(namespace, name, doc, problems)
                return ConvergeResult(namespace, name, Outcome.INVALID)
            if not problems:
                ars = AutoscalingRunnerSet.from_manifest(doc)
            # An invalid ARS being deleted is planned as gone: every scale set goes.
        records = await self.records_by_variant(namespace, name)
        wanted = (
            {d.variant for d in desired_scale_sets(ars)}
            if ars is not None and not is_deleting(ars)
            else set()
        )
        if ars is not None and wanted and verify and self._verify_due(namespace, name):
            await self._verify(namespace, name, ars, records)
        for record in self._drop_gone(namespace, name, records, wanted):
            await self._report_failure(
                namespace,
                name,
                record.variant,
                f"scale set {record.scale_set_id} ({record.scale_set_name}) no longer exists "
                "on GitHub: registering it again under the same name",
                retryable=True,
                scale_set_name=record.scale_set_name,
                kind="scale_set_gone",
            )
        removable = set(records) - wanted
        live = await self._live_variants(namespace, name, removable) if removable else set()
        plan = plan_scale_sets(ars, records, live)
        if not plan.actions:
            return ConvergeResult(namespace, name, Outcome.CONVERGED, plan)
        return await self._execute(namespace, name, ars, plan)

    async def _report_invalid(
        self, namespace: str, name: str, doc: Mapping[str, Any], problems: list[FieldError]
    ) -> None:
        self.metrics.errors.add(1, {"kind": "spec_invalid"})
        metadata = doc.get("metadata") or {}
        generation = metadata.get("generation")
        reason = summarize(problems)
        log.warning(
            "AutoscalingRunnerSet is invalid; not registering",
            extra={"namespace": namespace, "ars": name, "errors": reason},
        )
        if not self._should_report((namespace, name, "", f"spec.invalid:{generation}"), reason):
            return
        await self._publish(
            subjects.errors_subject(namespace, name),
            SpecInvalid(
                source=self.source,
                keys=EventKeys(namespace=namespace, ars=name),
                generation=generation if isinstance(generation, int) else None,
                errors=[SpecIssue(path=p.path, message=p.message) for p in problems],
            ),
        )

    async def _execute(
        self, namespace: str, name: str, ars: AutoscalingRunnerSet | None, plan: Plan
    ) -> ConvergeResult:
        result = ConvergeResult(namespace, name, Outcome.CONVERGED, plan)
        client: ActionsClient | None = None
        if plan.needs_actions_service:
            spec: dict[str, Any] = {}
            if ars is not None:
                url, secret = ars.spec.github_config_url, ars.spec.github_config_secret
                spec = ars.spec.model_dump(by_alias=True, exclude_none=True)
            else:
                first = next(a.record for a in plan.actions if a.record is not None)
                url, secret = first.github_config_url, first.github_config_secret
            try:
                client = await self.client_for(namespace, url, secret, spec)
            except CredentialsUnavailableError as exc:
                kind = "connection" if isinstance(exc, ServerConnectionError) else "credentials"
                await self._report_failure(namespace, name, "", str(exc), retryable=True, kind=kind)
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
                reason = _reason(exc)
                retryable = is_retryable(exc)  # the one decision: arcflow.common.errors
                scale_set = (
                    action.desired.name
                    if action.desired
                    else (action.record.scale_set_name if action.record else "")
                )
                await self._report_failure(
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
            self._clear_reports(namespace, name)
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
                await self._announce(action.record, ars)
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
        await self.records.put(record.key, record.encode())
        if self.gone.pop((namespace, name, action.variant), None) is not None:
            self.reregistered += 1
        await self._announce(record, ars)

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

    async def _announce(self, record: ScaleSetRecord, ars: AutoscalingRunnerSet | None) -> None:
        await self._publish(
            subjects.scalesets_subject(record.namespace, record.ars, record.variant),
            ScaleSetAssigned(
                source=self.source,
                **_scale_set_event_fields(record),
                runner_group_id=record.runner_group_id,
                runner_group_name=record.runner_group_name,
                labels=list(record.labels),
                ars_generation=ars.metadata.generation if ars is not None else None,
            ),
        )
        announced = record.model_copy(update={"announced": True})
        await self.records.put(announced.key, announced.encode())

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
        await self._publish(
            subjects.scalesets_subject(record.namespace, record.ars, record.variant),
            ScaleSetDeleted(
                source=self.source,
                **_scale_set_event_fields(record),
                reason=reason,
            ),
        )
        await self.records.delete(record.key)
        self.gone.pop((record.namespace, record.ars, record.variant), None)

    # --- periodic sweep -------------------------------------------------------------------

    async def sweep(self) -> list[ConvergeResult]:
        """Converge every ARS the cluster (the managed namespaces, when set) or the KV bucket
        knows of.

        Catches what events cannot: a removal waiting on runners whose last ERS event was
        missed, a credentials Secret created after the failure, an event dead-lettered while
        GitHub was down. Plans are mostly KEEP, which costs no Actions call.
        """
        keys: set[tuple[str, str]] = set()
        versions: dict[tuple[str, str], str] = {}
        scopes: tuple[str | None, ...] = self.namespaces or (None,)
        for scope in scopes:
            listed = await self.kube.list(AUTOSCALING_RUNNER_SET, namespace=scope)
            for item in listed.items:
                meta = item.get("metadata") or {}
                if meta.get("namespace") and meta.get("name"):
                    key = (str(meta["namespace"]), str(meta["name"]))
                    keys.add(key)
                    versions[key] = resource_version_of(item)
        for record in await self.load_records():
            if self.namespaces and record.namespace not in self.namespaces:
                continue  # not ours to read in a namespace-scoped install
            keys.add((record.namespace, record.ars))
        results: list[ConvergeResult] = []
        for namespace, name in sorted(keys):
            try:
                results.append(
                    await self.converge(
                        namespace,
                        name,
                        trigger="sweep",
                        seen_version=versions.get((namespace, name), ""),
                    )
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "sweep could not converge an ARS",
                    extra={"namespace": namespace, "ars": name, "error": _reason(exc)},
                )
        return results


def record_identity(key: str) -> tuple[str, str, str]:
    """``(namespace, ars, variant)`` of a KV key (re-exported for auditors and tests)."""
    return parse_record_key(key)


__all__ = [
    "ConvergeResult",
    "Outcome",
    "Registrar",
    "RetryableRegistrationError",
    "lock_key",
    "record_identity",
    "record_key",
]
