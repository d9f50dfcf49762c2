"""``arcflow audit``: tail or replay arcflow events from JetStream.

Reads through ephemeral push consumers (no ack, removed by the server when idle), one per
stream the selection touches, so auditing never disturbs the services' durable consumers; the
connection and the consumers come from :mod:`arcflow.common.service` (``client``,
``ephemeral``) like every other NATS client of arcflow (ADR 0034).
Only the persisted domains are reachable: ``arc.rpc.>`` (JIT configs) is never subscribed.
Without ``--follow`` it stops once every consumer has delivered what its stream held when
the command started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import click
import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from arcflow.common import subjects
from arcflow.common.events import (
    EVENT_REGISTRY,
    DeadLetter,
    EventBase,
    JobsBatch,
    K8sObjectChanged,
    MalformedEventError,
    ObjectWritten,
    RegistrationFailed,
    RunnerLifecycle,
    ScaleDecision,
    ScaleSetAssigned,
    ScaleSetDeleted,
    SpecInvalid,
    encode_event,
    parse_event,
)
from arcflow.common.nats import NatsSettings, stream_for_subject
from arcflow.common.service.client import nats_client
from arcflow.common.service.ephemeral import EphemeralReader, StartAt, open_ephemeral

from .audit_connection import ErrorRecorder, resolve_nats_url, unreachable_message

DOMAINS: Final = ("k8s", "scalesets", "jobs", "scale", "audit", "errors", "dlq")
ALL: Final = "all"
_FOLLOW_POLL_SECONDS: Final = 1.0
_CLI_RECONNECT_ATTEMPTS: Final = 3
#: Who ``arcflow audit`` connects as: the read-only ``arcflow-auditor`` user, whose only inbox
#: is ``_INBOX_auditor.>``.
AUDIT_NATS_IDENTITY: Final = "auditor"
_DURATION_RE: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class AuditInputError(ValueError):
    """The options do not describe a valid selection (the message says why)."""


@dataclass(frozen=True, slots=True)
class KeyFilter:
    """Namespace / ARS / variant keys an event must have (``None``: any)."""

    namespace: str | None = None
    ars: str | None = None
    variant: str | None = None

    def matches_subject(self, subject: str) -> bool:
        """True when the subject's keys match (used where the NATS filter cannot narrow)."""
        try:
            keys = subjects.parse_subject(subject)
        except ValueError:
            return False
        ars = keys.ars if keys.ars is not None else keys.name
        return (
            (self.namespace is None or keys.namespace == self.namespace)
            and (self.ars is None or ars == self.ars)
            and (self.variant is None or keys.variant == self.variant)
        )


@dataclass(frozen=True, slots=True)
class Source:
    """One stream and the subject filter its ephemeral consumer uses."""

    stream: str
    filter_subject: str
    client_side_keys: KeyFilter | None = None


def plan_sources(domain: str, keys: KeyFilter) -> list[Source]:
    """The streams and filters for a domain (or ``all``) narrowed by keys.

    Under ``all``, domains whose subjects cannot carry a requested key (a variant on ``k8s`` or
    ``errors``) are left out rather than widened. Dead letters are narrowed client-side by the
    keys of their original subject.
    """
    if domain != ALL and domain not in DOMAINS:
        raise AuditInputError(f"unknown domain {domain!r}; use one of {', '.join(DOMAINS)}, all")
    wanted = DOMAINS if domain == ALL else (domain,)
    sources: list[Source] = []
    for name in wanted:
        if keys.variant is not None and name in ("k8s", "errors"):
            if domain == ALL:
                continue
            raise AuditInputError(f"--variant does not apply to the {name} domain")
        if name == "dlq":
            filter_subject = subjects.filter_for("dlq")
            narrowed = keys if keys != KeyFilter() else None
            sources.append(
                Source(stream_for_subject(filter_subject).name, filter_subject, narrowed)
            )
            continue
        try:
            filter_subject = subjects.filter_for(
                name,  # type: ignore[arg-type]
                namespace=keys.namespace,
                ars=keys.ars,
                variant=keys.variant,
            )
        except ValueError as exc:
            raise AuditInputError(str(exc)) from exc
        sources.append(Source(stream_for_subject(filter_subject).name, filter_subject))
    for source in sources:
        if source.filter_subject.startswith(f"{subjects.PREFIX}.{subjects.DOMAIN_RPC}."):
            raise AuditInputError("the rpc subjects are never subscribed")  # defensive
    return sources


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``90s``, ``15m``, ``2h``, ``1d``, ``500ms`` (ago) or an RFC 3339 time, as a UTC datetime."""
    text = value.strip()
    match = _DURATION_RE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise AuditInputError(
            f"--since {value!r} is neither a duration (30s, 15m, 2h, 1d) nor an RFC 3339 time"
        ) from None
    if parsed.tzinfo is None:
        raise AuditInputError(f"--since {value!r} has no time zone; add Z or an offset")
    return parsed.astimezone(UTC)


def _keys_text(subject: str, event: EventBase) -> str:
    try:
        keys = subjects.parse_subject(subject)
    except ValueError:
        keys = None
    if keys is not None and keys.domain == subjects.DOMAIN_K8S:
        return f"{keys.resource}/{keys.namespace}/{keys.name}"
    namespace = keys.namespace if keys else event.keys.namespace
    ars = keys.ars if keys else event.keys.ars
    variant = keys.variant if keys else event.keys.variant
    parts = [namespace or "-", ars or "-"]
    if variant is not None:
        parts.append(variant or "(default)")
    return "/".join(parts)


def summarize(event: EventBase) -> str:
    """A short, secret-free description of what the event says."""
    if isinstance(event, K8sObjectChanged):
        where = f"{event.namespace}/{event.name}"
        return f"{event.change} {event.kind} {where} rv={event.resource_version}"
    if isinstance(event, ScaleSetAssigned):
        return (
            f"scale set {event.scale_set_name!r} id={event.scale_set_id} "
            f"group={event.runner_group_name} labels={','.join(event.labels)}"
        )
    if isinstance(event, ScaleSetDeleted):
        return f"scale set {event.scale_set_name!r} id={event.scale_set_id} {event.reason}".rstrip()
    if isinstance(event, RegistrationFailed):
        retry = "retryable" if event.retryable else "permanent"
        return f"scale set {event.scale_set_name!r} ({retry}): {event.reason}"
    if isinstance(event, SpecInvalid):
        return "; ".join(f"{e.path}: {e.message}" for e in event.errors)
    if isinstance(event, JobsBatch):
        stats = event.statistics
        kinds = ",".join(str(j.message_type) for j in event.jobs) or "no jobs"
        return (
            f"message {event.message_id} assigned={stats.total_assigned_jobs} "
            f"running={stats.total_running_jobs} [{kinds}]"
        )
    if isinstance(event, ScaleDecision):
        return (
            f"{event.ephemeral_runner_set} -> {event.desired_replicas} "
            f"(assigned={event.assigned_jobs} min={event.min_runners} "
            f"max={event.max_runners} patch={event.patch_id}) {event.reason}"
        ).rstrip()
    if isinstance(event, ObjectWritten):
        return f"{event.action} {event.kind} {event.namespace}/{event.name}: {event.why}"
    if isinstance(event, RunnerLifecycle):
        previous = f"{event.previous_phase} -> " if event.previous_phase else ""
        return f"runner {event.runner_name} {previous}{event.phase} {event.reason}".rstrip()
    if isinstance(event, DeadLetter):
        return (
            f"{event.original_subject}: {event.reason} "
            f"(deliveries={event.delivery_count}, consumer={event.consumer})"
        )
    return ""


def format_human(subject: str, event: EventBase) -> str:
    """One line: time, type, subject keys, summary."""
    when = event.occurred_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{when}  {event.type:<19} {_keys_text(subject, event)}  {summarize(event)}"


def format_jsonl(event: EventBase) -> str:
    """The event's JSON, as published (one line)."""
    return encode_event(event).decode("utf-8")


@dataclass(frozen=True, slots=True)
class Received:
    subject: str
    event: EventBase
    stream_seq: int


@dataclass
class AuditRequest:
    """Everything the reader needs; built from the options."""

    sources: list[Source]
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    start_time: datetime | None = None
    start_seq: int | None = None
    types: frozenset[str] = frozenset()
    follow: bool = False
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class _StreamReader:
    """One source's ephemeral consumer (:mod:`arcflow.common.service.ephemeral`)."""

    source: Source
    reader: EphemeralReader

    @property
    def backlog(self) -> int:
        return self.reader.backlog

    async def take(self, timeout: float) -> list[Msg]:  # noqa: ASYNC109 - first-message wait
        return await self.reader.take(timeout)


async def _open_reader(nc: NatsClient, source: Source, request: AuditRequest) -> _StreamReader:
    # An ephemeral create is all the auditor may send: it can never touch a service's durable
    # (docs/deploy.md, NATS permissions).
    start = StartAt(request.deliver_policy, request.start_time, request.start_seq)
    reader = await open_ephemeral(nc, source.stream, source.filter_subject, start)
    return _StreamReader(source, reader)


class AuditReader:
    """Decodes, filters and hands events to ``emit``; malformed ones go to ``warn``."""

    def __init__(
        self,
        nc: NatsClient,
        request: AuditRequest,
        emit: Callable[[Received], None],
        warn: Callable[[str], None],
    ) -> None:
        self._nc = nc
        self._request = request
        self._emit = emit
        self._warn = warn
        self.emitted = 0

    def _done(self) -> bool:
        return self._request.limit is not None and self.emitted >= self._request.limit

    def _decode(self, reader: _StreamReader, msg: Msg) -> Received | None:
        seq = msg.metadata.sequence.stream
        keys = reader.source.client_side_keys
        if keys is not None and not keys.matches_subject(msg.subject):
            return None
        try:
            event = parse_event(msg.data)
        except MalformedEventError as exc:
            self._warn(
                f"warning: {reader.source.stream} seq {seq} on {msg.subject}: skipped: {exc}"
            )
            return None
        if self._request.types and event.type not in self._request.types:
            return None
        return Received(msg.subject, event, seq)

    async def _backlog(self, reader: _StreamReader) -> list[Received]:
        received: list[Received] = []
        remaining = reader.backlog
        while remaining > 0:
            msgs = await reader.take(timeout=2.0)
            if not msgs:
                break  # messages aged out or were purged since the count
            for msg in msgs:
                remaining -= 1
                decoded = self._decode(reader, msg)
                if decoded is not None:
                    received.append(decoded)
                if msg.metadata.num_pending == 0:
                    remaining = 0
        return received

    async def run(self) -> None:
        readers = [
            await _open_reader(self._nc, source, self._request) for source in self._request.sources
        ]
        backlog: list[Received] = []
        for reader in readers:
            backlog.extend(await self._backlog(reader))
        if len(readers) > 1:
            backlog.sort(key=lambda r: r.event.occurred_at)
        for item in backlog:
            if self._done():
                return
            self._emit(item)
            self.emitted += 1
        if not self._request.follow or self._done():
            return
        queue: asyncio.Queue[Received] = asyncio.Queue()

        async def pump(reader: _StreamReader) -> None:
            while True:
                for msg in await reader.take(timeout=_FOLLOW_POLL_SECONDS):
                    decoded = self._decode(reader, msg)
                    if decoded is not None:
                        queue.put_nowait(decoded)

        tasks = [asyncio.create_task(pump(reader)) for reader in readers]
        try:
            while not self._done():
                item = await queue.get()
                self._emit(item)
                self.emitted += 1
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


async def run_audit(
    settings: NatsSettings,
    request: AuditRequest,
    emit: Callable[[Received], None],
    warn: Callable[[str], None],
    errors: ErrorRecorder | None = None,
) -> int:
    """Connect, read per ``request``, disconnect; returns how many events were emitted."""
    options: dict[str, Any] = {}
    if "ARCFLOW_NATS_MAX_RECONNECT_ATTEMPTS" not in os.environ:
        # A service retries forever; an operator at a terminal wants an error quickly.
        options["max_reconnect_attempts"] = _CLI_RECONNECT_ATTEMPTS
        options["reconnect_time_wait"] = 0.5
    # quiet: the command reports a failure itself, from the last error the recorder kept
    recorder = errors or ErrorRecorder()
    async with nats_client(
        settings, AUDIT_NATS_IDENTITY, quiet=True, on_error=recorder.callback, **options
    ) as nc:
        reader = AuditReader(nc, request, emit, warn)
        await reader.run()
        return reader.emitted


def build_request(
    *,
    domain: str,
    namespace: str | None,
    ars: str | None,
    variant: str | None,
    types: Sequence[str],
    since: str | None,
    from_seq: int | None,
    new: bool,
    follow: bool | None,
    limit: int | None,
) -> AuditRequest:
    """Validate the option combination and turn it into an :class:`AuditRequest`."""
    if variant is not None and variant in ("_",):
        variant = ""  # the default variant, as it appears in subjects
    starts = [name for name, given in (("--since", since), ("--from-seq", from_seq)) if given]
    if new:
        starts.append("--new")
    if len(starts) > 1:
        raise AuditInputError(f"{' and '.join(starts)} exclude each other; pick one start")
    sources = plan_sources(domain, KeyFilter(namespace, ars, variant))
    if not sources:
        raise AuditInputError("the filters leave no stream to read")
    request = AuditRequest(sources=sources, types=frozenset(types), limit=limit)
    if since is not None:
        request.deliver_policy = DeliverPolicy.BY_START_TIME
        request.start_time = parse_since(since)
    elif from_seq is not None:
        if len({s.stream for s in sources}) > 1:
            raise AuditInputError(
                "--from-seq is a stream sequence: pick one --domain (not all) to use it"
            )
        request.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
        request.start_seq = from_seq
    elif new:
        request.deliver_policy = DeliverPolicy.NEW
    request.follow = new if follow is None else follow
    return request


@click.command(name="audit")
@click.option(
    "--nats-url",
    default=None,
    help="NATS server(s); default: ARCFLOW_NATS_URL, else the running arcflow dev's.",
)
@click.option(
    "--domain",
    type=click.Choice([*DOMAINS, ALL]),
    default=ALL,
    show_default=True,
    help="Which event subjects to read (rpc is never read).",
)
@click.option("--namespace", default=None, help="Only events of this namespace.")
@click.option("--ars", default=None, help="Only events of this AutoscalingRunnerSet (k8s: name).")
@click.option("--variant", default=None, help="Only this variant ('' or _ : the default one).")
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(sorted(EVENT_REGISTRY)),
    help="Only these event types (repeatable).",
)
@click.option("--since", default=None, help="Start at a time: 15m, 2h, 1d ago or RFC 3339.")
@click.option(
    "--from-seq", type=click.IntRange(1), default=None, help="Start at a stream sequence."
)
@click.option("--new", is_flag=True, help="Only events published from now on (implies --follow).")
@click.option(
    "--follow/--no-follow",
    default=None,
    help="Keep waiting for new events (default: stop at the end of the stream).",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["human", "jsonl"]),
    default="human",
    show_default=True,
    help="One summary line per event, or the event JSON per line.",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="Stop after N events.")
def audit_command(
    nats_url: str | None,
    domain: str,
    namespace: str | None,
    ars: str | None,
    variant: str | None,
    types: tuple[str, ...],
    since: str | None,
    from_seq: int | None,
    new: bool,
    follow: bool | None,
    output: str,
    limit: int | None,
) -> None:
    """Tail or replay arcflow events from JetStream, filtered by keys and event type.

    Connection settings come from ARCFLOW_NATS_* (user, password, creds_file, TLS); --nats-url
    overrides ARCFLOW_NATS_URL. Without either, the URL of a running `arcflow dev` is read from
    its connection file. Malformed messages are reported on stderr and skipped.
    """
    try:
        request = build_request(
            domain=domain,
            namespace=namespace,
            ars=ars,
            variant=variant,
            types=types,
            since=since,
            from_seq=from_seq,
            new=new,
            follow=follow,
            limit=limit,
        )
        overrides: dict[str, Any] = {"name": "arcflow-audit"}
        resolved = resolve_nats_url(nats_url)
        if resolved.url:
            overrides["url"] = resolved.url
        settings = NatsSettings(**overrides)
        # raises on inconsistent settings before connecting
        settings.connect_options(AUDIT_NATS_IDENTITY)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    def emit(item: Received) -> None:
        if output == "jsonl":
            click.echo(format_jsonl(item.event))
        else:
            click.echo(format_human(item.subject, item.event))

    def warn(line: str) -> None:
        click.echo(line, err=True)

    if resolved.from_file is not None:
        warn(f"NATS {settings.url} of the running arcflow dev ({resolved.from_file})")
    errors = ErrorRecorder()
    try:
        emitted = asyncio.run(run_audit(settings, request, emit, warn, errors))
    except KeyboardInterrupt:
        return
    except nats.errors.NoServersError:
        raise click.ClickException(unreachable_message(settings.url, errors.last)) from None
    except nats.js.errors.NotFoundError:
        warn(f"0 events: no arcflow stream on NATS at {settings.url} yet (no service ran there)")
        return
    except (OSError, nats.errors.Error) as exc:
        raise click.ClickException(f"cannot read from NATS at {settings.url}: {exc}") from None
    if emitted == 0:
        warn("0 events" + (" (check the filters)" if _filtered(request) else ""))


def _filtered(request: AuditRequest) -> bool:
    return bool(request.types) or any(s.client_side_keys for s in request.sources)


__all__ = [
    "ALL",
    "DOMAINS",
    "AuditInputError",
    "AuditReader",
    "AuditRequest",
    "KeyFilter",
    "Received",
    "Source",
    "audit_command",
    "build_request",
    "format_human",
    "format_jsonl",
    "parse_since",
    "plan_sources",
    "run_audit",
    "summarize",
]
